// The resolver's Kubernetes adapters (error classification) and its flags.
#include <gtest/gtest.h>

#include <boost/asio/post.hpp>
#include <deque>
#include <future>
#include <memory>
#include <vector>

#include "kube/client.h"
#include "kube/core/status.h"
#include "resolver/kube_adapters.h"
#include "resolver/service.h"
#include "scripted_transport.h"

namespace aw::resolver {
namespace {

kube::ApiError Err(int status, std::string reason, std::string message) {
  kube::ApiError e;
  e.http_status = status;
  e.code = status;
  e.reason = std::move(reason);
  e.message = std::move(message);
  return e;
}

TEST(ClassifyPatchError, MapsApiErrors) {
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(Err(409, "Conflict", "the object has been modified"))),
            PatchStatus::kConflict);
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(Err(
                422, "Invalid", "testing value /metadata/resourceVersion failed: test failed"))),
            PatchStatus::kConflict);
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(Err(
                422, "Invalid", "the server rejected our request due to an error in our request"))),
            PatchStatus::kConflict);
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(
                Err(422, "Invalid", "status.state: Unsupported value: \"Allocating\""))),
            PatchStatus::kRejected);
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(Err(404, "NotFound", "gameservers \"x\" not found"))),
            PatchStatus::kNotFound);
  EXPECT_EQ(PatchStatusOf(
                ClassifyPatchError(Err(400, "BadRequest", "admission webhook denied the request"))),
            PatchStatus::kRejected);
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(Err(403, "Forbidden", "no"))), PatchStatus::kRejected);
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(Err(500, "InternalError", "etcd"))),
            PatchStatus::kRetry);
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(Err(429, "TooManyRequests", "slow down"))),
            PatchStatus::kRetry);
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(kube::TransportError("connection refused"))),
            PatchStatus::kRetry);
  // The one mapping's other rows (kube::ApiError::ToStatus, as client-go reads them): 409
  // AlreadyExists is a refusal, not a conflict; 408 is worth retrying.
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(Err(409, "AlreadyExists", "exists"))),
            PatchStatus::kRejected);
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(Err(408, "Timeout", "slow"))), PatchStatus::kRetry);
  EXPECT_EQ(ClassifyPatchError(Err(409, "Conflict", "modified")).code(),
            Err(409, "Conflict", "modified").ToStatus().code());
}

// A transport that holds every asynchronous call until the test answers it.
class HeldTransport final : public test_util::ScriptedTransport {
 public:
  kube::Result<kube::HttpResponse> Do(const kube::HttpRequest&) override {
    return kube::TransportError("blocking call not expected");
  }
  kube::Result<kube::HttpResponse> Stream(const kube::HttpRequest&,
                                          const std::function<bool(std::string_view)>&) override {
    return kube::TransportError("stream not expected");
  }
  void DoAsync(const kube::HttpRequest& req, Done done) override {
    held.push_back({req, std::move(done)});
  }
  void Shutdown() override {}
  bool IsShutdown() const override { return false; }
  // Answers the oldest held call with `status`.
  void Answer(int status, std::string body) {
    auto h = std::move(held.front());
    held.pop_front();
    kube::HttpResponse r;
    r.status = status;
    r.body = std::move(body);
    h.second(std::move(r));
  }
  std::deque<std::pair<kube::HttpRequest, Done>> held;
};

// Outcome patches are asynchronous: at most max_in_flight are sent at once, the rest wait in order
// and go out as answers come back; each completion carries the classified result.
TEST(KubePatcher, AsynchronousPatchesAreBoundedAndClassified) {
  auto owned = std::make_unique<HeldTransport>();
  HeldTransport* t = owned.get();
  kube::Client client(std::move(owned));
  std::vector<Status> results(5);
  std::vector<bool> called(5, false);
  {
    KubePatcher patcher(client, 2);
    for (int i = 0; i < 5; ++i) {
      patcher.PatchGameServerAsync("ns", "gs-" + std::to_string(i), "[]", [&, i](Status s) {
        results[static_cast<size_t>(i)] = std::move(s);
        called[static_cast<size_t>(i)] = true;
      });
    }
    ASSERT_EQ(t->held.size(), 2u);  // two in flight, three waiting
    EXPECT_EQ(t->held[0].first.method, "PATCH");
    EXPECT_NE(t->held[0].first.path.find("/gameservers/gs-0"), std::string::npos);
    EXPECT_EQ(t->held[0].first.content_type, "application/json-patch+json");
    t->Answer(200, "{}");
    ASSERT_EQ(t->held.size(), 2u);  // gs-2 took the freed slot
    EXPECT_NE(t->held[1].first.path.find("/gameservers/gs-2"), std::string::npos);
    t->Answer(409, R"({"kind":"Status","reason":"Conflict","code":409})");
    t->Answer(500, "{}");
    t->Answer(404, R"({"kind":"Status","reason":"NotFound","code":404})");
    t->Answer(200, "{}");
    EXPECT_TRUE(t->held.empty());
  }  // the destructor returns: nothing in flight
  for (bool c : called) EXPECT_TRUE(c);
  EXPECT_TRUE(results[0].ok());
  EXPECT_EQ(PatchStatusOf(results[1]), PatchStatus::kConflict);
  EXPECT_EQ(PatchStatusOf(results[2]), PatchStatus::kRetry);
  EXPECT_EQ(PatchStatusOf(results[3]), PatchStatus::kNotFound);
  EXPECT_TRUE(results[4].ok());
}

TEST(ResolverFlags, ProbeTimeoutMustBeBelowThePeriod) {
  policy::Policy policy;  // default probe period 250ms
  ResolverFlags f;
  EXPECT_TRUE(ValidateResolverFlags(f, policy).ok());
  f.probe_timeout = std::chrono::milliseconds(250);
  Status err = ValidateResolverFlags(f, policy);
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.message().find("--probe-timeout"), std::string::npos);
}

TEST(ResolverFlags, Registered) {
  flags::FlagSet fs("t", "t");
  ResolverFlags f;
  RegisterResolverFlags(fs, &f);
  auto r = fs.Parse(std::vector<std::string>{"--probe-timeout=100ms", "--probe-concurrency=64",
                                             "--resync-period=10s", "--udp-probe-payload=hi",
                                             "--resolver-workers=4"});
  ASSERT_EQ(r.status, flags::FlagSet::Status::kOk) << r.message;
  EXPECT_EQ(f.probe_timeout, std::chrono::milliseconds(100));
  EXPECT_EQ(f.probe_concurrency, 64u);
  EXPECT_EQ(f.resync_period, std::chrono::seconds(10));
  EXPECT_EQ(f.udp_probe_payload, "hi");
  EXPECT_EQ(f.workers, 4u);
}

}  // namespace
}  // namespace aw::resolver

namespace aw::resolver {
namespace {

// Issue 35: Drain() (and so the destructor) waits for callbacks that run on the client's I/O
// thread; called there it would wait for ever, so it fails at once, naming the rule.
TEST(KubePatcherDeathTest, DrainOnTheClientsIoThreadFailsLoudly) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        kube::Client client(std::make_unique<HeldTransport>());
        KubePatcher patcher(client, 1);
        std::promise<void> ran;
        boost::asio::post(client.executor(), [&] {
          patcher.Drain();
          ran.set_value();
        });
        ran.get_future().wait();
      },
      "KubePatcher::Drain called on its own I/O thread");
}

}  // namespace
}  // namespace aw::resolver
