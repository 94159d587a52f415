#include "util/flags.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace aw::flags {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct Cfg {
  int port = 8443;
  std::string name = "default";
  std::string level = "info";
  bool flag = false;
  bool on = true;
  size_t size = 10;
  std::vector<std::string> users{"a", "b"};
  std::chrono::nanoseconds timeout = seconds(30);
};

class FlagsTest : public ::testing::Test {
 protected:
  FlagsTest() : fs_("prog", "A program.") {
    fs_.Int("port", &cfg_.port, "the port", 1, 65535);
    fs_.String("name", &cfg_.name, "a name");
    fs_.Enum("level", &cfg_.level, {"debug", "info"}, "a level");
    fs_.Bool("flag", &cfg_.flag, "a bool");
    fs_.Bool("on", &cfg_.on, "a bool on by default");
    fs_.Size("size", &cfg_.size, "a size", 1, 100);
    fs_.StringList("users", &cfg_.users, "users");
    fs_.Duration("timeout", &cfg_.timeout, "a duration", seconds(1));
  }
  FlagSet::Result Parse(std::vector<std::string> args) { return fs_.Parse(args); }

  Cfg cfg_;
  FlagSet fs_;
};

TEST_F(FlagsTest, DefaultsUntouchedWithoutArguments) {
  EXPECT_EQ(Parse({}).status, FlagSet::Status::kOk);
  EXPECT_EQ(cfg_.port, 8443);
  EXPECT_EQ(cfg_.users, (std::vector<std::string>{"a", "b"}));
}

TEST_F(FlagsTest, EqualsAndSpaceForms) {
  auto r = Parse({"--port=9443", "--name", "x y", "--timeout", "1m30s", "--level=debug"});
  ASSERT_EQ(r.status, FlagSet::Status::kOk) << r.message;
  EXPECT_EQ(cfg_.port, 9443);
  EXPECT_EQ(cfg_.name, "x y");
  EXPECT_EQ(cfg_.timeout, seconds(90));
  EXPECT_EQ(cfg_.level, "debug");
  EXPECT_EQ(fs_.Given(), (std::vector<std::string>{"port", "name", "timeout", "level"}));
}

TEST_F(FlagsTest, SingleDashAccepted) {
  ASSERT_EQ(Parse({"-port=1"}).status, FlagSet::Status::kOk);
  EXPECT_EQ(cfg_.port, 1);
}

TEST_F(FlagsTest, BoolForms) {
  ASSERT_EQ(Parse({"--flag", "--on=false"}).status, FlagSet::Status::kOk);
  EXPECT_TRUE(cfg_.flag);
  EXPECT_FALSE(cfg_.on);
  ASSERT_EQ(Parse({"--flag=false", "--on=T"}).status, FlagSet::Status::kOk);
  EXPECT_FALSE(cfg_.flag);
  EXPECT_TRUE(cfg_.on);
}

TEST_F(FlagsTest, BoolNeverConsumesNextArgument) {
  auto r = Parse({"--flag", "false"});
  EXPECT_EQ(r.status, FlagSet::Status::kError);
  EXPECT_NE(r.message.find("unexpected argument"), std::string::npos) << r.message;
}

TEST_F(FlagsTest, EmptyValueAllowedForStrings) {
  ASSERT_EQ(Parse({"--name="}).status, FlagSet::Status::kOk);
  EXPECT_EQ(cfg_.name, "");
}

TEST_F(FlagsTest, StringListSplitsAndTrims) {
  ASSERT_EQ(Parse({"--users= x, y,,z "}).status, FlagSet::Status::kOk);
  EXPECT_EQ(cfg_.users, (std::vector<std::string>{"x", "y", "z"}));
  ASSERT_EQ(Parse({"--users="}).status, FlagSet::Status::kOk);
  EXPECT_TRUE(cfg_.users.empty());
}

TEST_F(FlagsTest, Help) {
  EXPECT_EQ(Parse({"--port=1", "--help"}).status, FlagSet::Status::kHelp);
  EXPECT_EQ(Parse({"-h"}).status, FlagSet::Status::kHelp);
}

struct BadCase {
  std::vector<std::string> args;
  std::string needle;
};

class FlagsBadTest : public FlagsTest, public ::testing::WithParamInterface<BadCase> {};

TEST_P(FlagsBadTest, ErrorNamesTheProblem) {
  auto r = Parse(GetParam().args);
  EXPECT_EQ(r.status, FlagSet::Status::kError);
  EXPECT_NE(r.message.find(GetParam().needle), std::string::npos) << r.message;
}

INSTANTIATE_TEST_SUITE_P(
    All, FlagsBadTest,
    ::testing::Values(
        BadCase{{"--nope"}, "unknown flag: --nope"}, BadCase{{"--nope=1"}, "unknown flag: --nope"},
        BadCase{{"--port"}, "needs an argument: --port"},
        BadCase{{"--port=x"}, "--port: not an integer"},
        BadCase{{"--port=1x"}, "--port: not an integer"},
        BadCase{{"--port=0"}, "between 1 and 65535"},
        BadCase{{"--port=99999999999999999999"}, "--port"}, BadCase{{"--size=-1"}, "--size"},
        BadCase{{"--size=101"}, "between 1 and 100"},
        BadCase{{"--level=loud"}, "one of debug|info"}, BadCase{{"--flag=maybe"}, "not a boolean"},
        BadCase{{"--timeout=5"}, "not a duration"}, BadCase{{"--timeout=-1s"}, "not a duration"},
        BadCase{{"--timeout=500ms"}, "at least 1s"}, BadCase{{"positional"}, "unexpected argument"},
        BadCase{{"--"}, "unexpected argument"}, BadCase{{"-"}, "unexpected argument"}));

TEST_F(FlagsTest, UsageListsEveryFlagWithDefault) {
  std::string usage = fs_.Usage();
  EXPECT_NE(usage.find("A program."), std::string::npos);
  EXPECT_NE(usage.find("--port\n      the port (default 8443)"), std::string::npos) << usage;
  EXPECT_NE(usage.find("--timeout\n      a duration (default 30s)"), std::string::npos) << usage;
  EXPECT_NE(usage.find("--users\n      users (default a,b)"), std::string::npos) << usage;
  EXPECT_NE(usage.find("--flag\n      a bool (default false)"), std::string::npos) << usage;
  EXPECT_NE(usage.find("(debug|info) (default info)"), std::string::npos) << usage;
  EXPECT_NE(usage.find("--help"), std::string::npos);
}

TEST(FlagsRegistration, DuplicateNameIsAProgrammingError) {
  FlagSet fs("p", "s");
  int a = 0, b = 0;
  fs.Int("x", &a, "x");
  EXPECT_THROW(fs.Int("x", &b, "again"), std::logic_error);
  EXPECT_THROW(fs.Int("help", &b, "reserved"), std::logic_error);
  EXPECT_THROW(fs.Int("--y", &b, "dashes"), std::logic_error);
}

}  // namespace
}  // namespace aw::flags
