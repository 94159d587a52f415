// Status and StatusOr (util/status.h): codes, messages, Annotate, and the value-or-error contract.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "util/status.h"

namespace aw {
namespace {

TEST(Status, OkHasNoMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(Status::Ok().Annotate("context").ok());
}

TEST(Status, ErrorCarriesCodeAndMessageAndAnnotates) {
  Status s = Status::NotFound("gameserver default/gs-1");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  Status a = s.Annotate("promote");
  EXPECT_EQ(a.code(), Status::Code::kNotFound);
  EXPECT_EQ(a.message(), "promote: gameserver default/gs-1");
  EXPECT_NE(a.ToString().find("promote: gameserver default/gs-1"), std::string::npos);
}

TEST(StatusOr, HoldsAValue) {
  StatusOr<std::string> v(std::string("text"));
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(static_cast<bool>(v));
  EXPECT_TRUE(v.status().ok());
  EXPECT_EQ(*v, "text");
  EXPECT_EQ(v->size(), 4u);
  std::string moved = std::move(v).value();
  EXPECT_EQ(moved, "text");
}

TEST(StatusOr, HoldsAnError) {
  StatusOr<int> e(Status::InvalidArgument("--port: not a number"));
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(e.status().message(), "--port: not a number");
}

TEST(StatusOr, OkStatusWithoutValueIsAnInternalError) {
  StatusOr<int> e(Status::Ok());
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Status::Code::kInternal);
}

TEST(StatusOr, MoveOnlyValues) {
  StatusOr<std::unique_ptr<int>> p(std::make_unique<int>(7));
  ASSERT_TRUE(p.ok());
  std::unique_ptr<int> got = std::move(p).value();
  EXPECT_EQ(*got, 7);
}

TEST(StatusOrDeathTest, ValueOfAnErrorAborts) {
  StatusOr<int> e(Status::Unavailable("down"));
  EXPECT_DEATH({ (void)e.value(); }, "");
}

}  // namespace
}  // namespace aw
