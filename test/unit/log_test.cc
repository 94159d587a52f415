// The structured log: the record's escaping, and deferred writing on an event loop's thread.
#include "util/io/log.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <stdexcept>
#include <string>
#include <thread>

namespace aw::log {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(LogFormat, EscapesQuotesBackslashesAndEveryControlByteInJson) {
  const std::string rec =
      FormatRecord(Format::kJson, Level::kInfo, std::string("a\"b\\c\nd\re\tf\x01g\x1fh") + '\0',
                   {{"k\"ey", "plain value"}});
  EXPECT_NE(rec.find(R"("msg":"a\"b\\c\nd\re\tf\u0001g\u001fh\u0000")"), std::string::npos) << rec;
  EXPECT_NE(rec.find(R"("k\"ey":"plain value"})"), std::string::npos) << rec;
  EXPECT_EQ(rec.back(), '\n');
  EXPECT_EQ(Count(rec, "\n"), 1u);
  EXPECT_EQ(rec.rfind("{\"ts\":\"", 0), 0u);
}

TEST(LogFormat, KeepsLongRunsAndMultibyteTextAsTheyAre) {
  const std::string run(5000, 'x');
  const std::string utf8 = "caf\xc3\xa9 \xe2\x9c\x93";
  const std::string rec = FormatRecord(Format::kJson, Level::kWarn, run + "\"" + utf8, {});
  EXPECT_NE(rec.find("\"msg\":\"" + run + "\\\"" + utf8 + "\"}"), std::string::npos);
  EXPECT_NE(rec.find(R"("level":"warn")"), std::string::npos);
}

TEST(LogFormat, QuotesTextValuesOnlyWhenNeeded) {
  const std::string rec =
      FormatRecord(Format::kText, Level::kInfo, "two words", {{"a", "b"}, {"c", ""}});
  EXPECT_NE(rec.find(" info \"two words\" a=b c=\"\"\n"), std::string::npos) << rec;
}

TEST(LogDeferred, InfoWaitsForTheScheduledFlushAndLeavesInOneWrite) {
  testing::internal::CaptureStderr();
  int scheduled = 0;
  {
    DeferredWrites deferred([&] { ++scheduled; });
    info("first", {{"n", "1"}});
    info("second", {{"n", "2"}});
    EXPECT_EQ(scheduled, 1);  // once per batch
    DeferredWrites::Flush();
    info("third");
    EXPECT_EQ(scheduled, 2);  // a new batch after the flush
  }                           // the destructor writes "third"
  const std::string out = testing::internal::GetCapturedStderr();
  const size_t first = out.find("\"first\"");
  const size_t second = out.find("\"second\"");
  const size_t third = out.find("\"third\"");
  ASSERT_NE(first, std::string::npos) << out;
  ASSERT_NE(second, std::string::npos) << out;
  ASSERT_NE(third, std::string::npos) << out;
  EXPECT_LT(first, second);
  EXPECT_LT(second, third);
  EXPECT_EQ(Count(out, "\n"), 3u);
}

TEST(LogDeferred, NothingIsWrittenBeforeTheFlushAndWarningsAreNotDeferred) {
  testing::internal::CaptureStderr();
  {
    DeferredWrites deferred([] {});
    info("held back");
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");  // deferred: not written yet
    testing::internal::CaptureStderr();
    warn("at once");  // flushes "held back" first, then itself
    info("after");
    // Without the destructor's flush "after" would be lost: checked below.
  }
  const std::string out = testing::internal::GetCapturedStderr();
  const size_t held = out.find("held back");
  const size_t once = out.find("at once");
  const size_t after = out.find("\"after\"");
  ASSERT_NE(held, std::string::npos) << out;
  ASSERT_NE(once, std::string::npos) << out;
  ASSERT_NE(after, std::string::npos) << out;
  EXPECT_LT(held, once);
  EXPECT_LT(once, after);
}

TEST(LogDeferred, AFullBatchIsWrittenWithoutWaitingForTheFlush) {
  const std::string big(2000, 'y');
  int scheduled = 0;
  testing::internal::CaptureStderr();
  std::string before_flush;
  {
    DeferredWrites deferred([&] { ++scheduled; });
    for (int i = 0; i < 20; ++i) info(big, {{"i", std::to_string(i)}});  // ~40 KiB
    before_flush = testing::internal::GetCapturedStderr();
    testing::internal::CaptureStderr();
  }
  const std::string rest = testing::internal::GetCapturedStderr();
  // At least two 16 KiB batches left before any flush ran; the destructor wrote the remainder.
  EXPECT_GE(Count(before_flush, "\n"), 8u);
  EXPECT_EQ(Count(before_flush, "\n") + Count(rest, "\n"), 20u);
  EXPECT_GT(scheduled, 1);
}

TEST(LogDeferred, OnePerThreadAndOtherThreadsWriteAtOnce) {
  DeferredWrites deferred([] {});
  EXPECT_THROW(DeferredWrites([] {}), std::logic_error);
  testing::internal::CaptureStderr();
  std::thread([] { info("from another thread"); }).join();
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("from another thread"), std::string::npos) << out;
}

TEST(LogDeferred, PostedToTheThreadsOwnContextTheBatchLeavesAfterTheQueuedHandlers) {
  boost::asio::io_context ioc;
  testing::internal::CaptureStderr();
  std::string seen_by_last_handler;
  {
    DeferredWrites deferred([&] { boost::asio::post(ioc, [] { DeferredWrites::Flush(); }); });
    for (int i = 0; i < 3; ++i) {
      boost::asio::post(ioc, [i] { info("handled", {{"i", std::to_string(i)}}); });
    }
    ioc.run();
    seen_by_last_handler = testing::internal::GetCapturedStderr();
    testing::internal::CaptureStderr();
    info("unflushed at the end");
  }
  const std::string rest = testing::internal::GetCapturedStderr();
  EXPECT_EQ(Count(seen_by_last_handler, "\"handled\""), 3u) << seen_by_last_handler;
  EXPECT_NE(rest.find("unflushed at the end"), std::string::npos) << rest;
}

}  // namespace
}  // namespace aw::log
