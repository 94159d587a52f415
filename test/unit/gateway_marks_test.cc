// gateway::GameServerMarks on a fake Kubernetes transport (issue 25: the gateway's I/O unit-tested,
// its writes asynchronous calls): the mark's compare-and-swap (the caller's view first, a refused
// `test` re-read and written again, a server no longer Allocated refused without a write), at
// most --delivery-workers writes in flight, and the destructor waiting for the writes submitted.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/post.hpp>
#include <chrono>
#include <deque>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "contract/keys.h"
#include "gateway/io/marks.h"
#include "kube/client.h"
#include "scripted_transport.h"
#include "util/io/mutex.h"

namespace aw::gateway {
namespace {

using namespace std::chrono_literals;

// Answers each request with `answer` (method, path, body) and records it. With hold(true),
// DoAsync keeps the calls until Release() answers the oldest one.
class FakeApi final : public test_util::ScriptedTransport {
 public:
  using Answer = std::function<kube::HttpResponse(const kube::HttpRequest&)>;
  explicit FakeApi(Answer answer) : answer_(std::move(answer)) {}

  kube::Result<kube::HttpResponse> Do(const kube::HttpRequest& req) override {
    {
      MutexLock lk(mu_);
      seen_.push_back(req.method + " " + req.path);
    }
    return answer_(req);
  }
  kube::Result<kube::HttpResponse> Stream(const kube::HttpRequest&,
                                          const std::function<bool(std::string_view)>&) override {
    return kube::TransportError("no streams here", false);
  }
  void DoAsync(const kube::HttpRequest& req, Done done) override {
    {
      MutexLock lk(mu_);
      if (hold_) {
        seen_.push_back(req.method + " " + req.path);
        held_.push_back({req, std::move(done)});
        return;
      }
    }
    done(Do(req));
  }
  void Shutdown() override {}
  bool IsShutdown() const override { return false; }

  void Hold(bool hold) {
    MutexLock lk(mu_);
    hold_ = hold;
  }
  size_t Held() {
    MutexLock lk(mu_);
    return held_.size();
  }
  void ReleaseOldest() {
    std::pair<kube::HttpRequest, Done> call;
    {
      MutexLock lk(mu_);
      call = std::move(held_.front());
      held_.pop_front();
    }
    call.second(answer_(call.first));
  }
  std::vector<std::string> Seen() {
    MutexLock lk(mu_);
    return seen_;
  }

 private:
  const Answer answer_;
  Mutex mu_;
  bool hold_ GUARDED_BY(mu_) = false;
  std::deque<std::pair<kube::HttpRequest, Done>> held_ GUARDED_BY(mu_);
  std::vector<std::string> seen_ GUARDED_BY(mu_);
};

kube::HttpResponse Json(int status, std::string body) {
  kube::HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

std::string GameServer(const std::string& state, const std::string& rv) {
  return R"({"apiVersion":"agones.dev/v1","kind":"GameServer","metadata":{"name":"gs-1",)"
         R"("namespace":"ns","resourceVersion":")" +
         rv + R"(","annotations":{}},"status":{"state":")" + state + R"("}})";
}

const std::string kPath = "/apis/agones.dev/v1/namespaces/ns/gameservers/gs-1";

Status Mark(GameServerMarks& marks, std::optional<policy::GameServerView> seen) {
  std::promise<Status> p;
  DeliveryMark m{"ns", "gs-1", "2026-12-05T06:00:00.000000001Z", std::move(seen)};
  marks.MarkDelivered(m, [&p](Status s) { p.set_value(s); });
  return p.get_future().get();
}

policy::GameServerView Allocated(const std::string& rv) {
  policy::GameServerView v;
  v.present = true;
  v.namespace_ = "ns";
  v.name = "gs-1";
  v.resource_version = rv;
  v.state = std::string(keys::kStateAllocated);
  return v;
}

TEST(GameServerMarks, TheCallersViewFirstThenARefusedTestReReadsAndWritesAgain) {
  std::atomic<int> patches{0};
  auto api = std::make_unique<FakeApi>([&](const kube::HttpRequest& req) {
    if (req.method == "GET") return Json(200, GameServer("Allocated", "7"));
    // The first patch, tested on the caller's resourceVersion 5, meets a newer object.
    if (patches.fetch_add(1) == 0) {
      EXPECT_NE(req.body.find(R"("value":"5")"), std::string::npos) << req.body;
      return Json(422, R"({"kind":"Status","code":422,"reason":"Invalid"})");
    }
    EXPECT_NE(req.body.find(R"("value":"7")"), std::string::npos) << req.body;
    return Json(200, GameServer("Allocated", "8"));
  });
  FakeApi* fake = api.get();
  kube::Client client(std::move(api));
  GameServerMarks marks(client, 4);
  EXPECT_TRUE(Mark(marks, Allocated("5")).ok());
  EXPECT_EQ(fake->Seen(),
            (std::vector<std::string>{"PATCH " + kPath, "GET " + kPath, "PATCH " + kPath}));
}

TEST(GameServerMarks, AServerNoLongerAllocatedIsRefusedWithoutAWrite) {
  auto api = std::make_unique<FakeApi>(
      [](const kube::HttpRequest&) { return Json(200, GameServer("Unhealthy", "9")); });
  FakeApi* fake = api.get();
  kube::Client client(std::move(api));
  GameServerMarks marks(client, 4);
  Status s = Mark(marks, std::nullopt);
  EXPECT_EQ(s.code(), Status::Code::kConflict) << s.ToString();
  EXPECT_EQ(fake->Seen(), (std::vector<std::string>{"GET " + kPath}));
}

TEST(GameServerMarks, AtMostWorkersWritesInFlightAndTheDestructorWaitsForTheRest) {
  auto api = std::make_unique<FakeApi>(
      [](const kube::HttpRequest&) { return Json(200, GameServer("Allocated", "3")); });
  FakeApi* fake = api.get();
  fake->Hold(true);
  kube::Client client(std::move(api));
  auto marks = std::make_unique<GameServerMarks>(client, 2);
  for (int i = 0; i < 5; ++i) marks->ReleaseNow("ns", "gs-1", "");
  EXPECT_EQ(fake->Held(), 2u);  // two in flight, three waiting their turn
  fake->ReleaseOldest();
  EXPECT_EQ(fake->Held(), 2u);  // the freed slot went to the next write at once
  EXPECT_EQ(fake->Seen().size(), 3u);

  std::atomic<bool> destroyed{false};
  std::thread owner([&] {
    marks.reset();  // a SIGTERM's releases are sent before the process exits
    destroyed = true;
  });
  for (int answered = 0; answered < 4; ++answered) {
    for (int i = 0; i < 1000 && fake->Held() == 0; ++i) std::this_thread::sleep_for(1ms);
    ASSERT_GT(fake->Held(), 0u);
    EXPECT_FALSE(destroyed.load());  // still writes to wait for
    fake->ReleaseOldest();
  }
  owner.join();
  EXPECT_TRUE(destroyed.load());
  EXPECT_EQ(fake->Seen().size(), 5u);
}

// Issue 35: the destructor waits for the writes in flight, whose callbacks run on the client's
// I/O thread; destroyed there it would wait for ever, so it fails at once, naming the rule.
TEST(GameServerMarksDeathTest, DestroyedOnTheClientsIoThreadFailsLoudly) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        kube::Client client(
            std::make_unique<FakeApi>([](const kube::HttpRequest&) { return Json(200, "{}"); }));
        auto marks = std::make_unique<GameServerMarks>(client, 1);
        std::promise<void> ran;
        boost::asio::post(client.executor(), [&] {
          marks.reset();
          ran.set_value();
        });
        ran.get_future().wait();
      },
      "~GameServerMarks called on its own I/O thread");
}

}  // namespace
}  // namespace aw::gateway
