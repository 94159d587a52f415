// The Kubernetes-side components over a scripted fake API (a fake Transport answering each
// request from a handler, set up once by the FakeApiTest fixture): the event recorder (create, then
// aggregate into a count patch), the leader elector (acquire a missing Lease, lead, release it on
// Stop; stay a follower of a fresh Lease) and the CRD guard (the leader repairs the enum, a
// follower fails open). Every wait is on a condition with a bound.
#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <rapidjson/document.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "contract/crd_state.h"
#include "kube/client.h"
#include "kube/core/json_text.h"
#include "kube/crd_guard.h"
#include "kube/events.h"
#include "kube/leader_election.h"
#include "scripted_transport.h"

namespace aw::kube {
namespace {

using namespace std::chrono_literals;

struct Seen {
  std::string method, path, body;
};

// Answers every request with `handler` and records it; WaitFor awaits a predicate on the record.
class FakeApi final : public test_util::ScriptedTransport {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;
  explicit FakeApi(Handler handler) : handler_(std::move(handler)) {}

  Result<HttpResponse> Do(const HttpRequest& req) override {
    if (shutdown_) return TransportError("shut down", true);
    HttpResponse res = handler_(req);
    {
      std::lock_guard<std::mutex> lk(mu_);
      seen_.push_back({req.method, req.path, req.body});
    }
    cv_.notify_all();
    return res;
  }
  // A watch stays open, sending nothing, until cancelled or shut down (the informer's Stop).
  Result<HttpResponse> Stream(const HttpRequest& req,
                              const std::function<bool(std::string_view)>&) override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      seen_.push_back({"WATCH", req.path, ""});
    }
    cv_.notify_all();
    // A Cancellation notifies nobody but a real connection: look at it every few milliseconds.
    std::unique_lock<std::mutex> lk(mu_);
    while (!shutdown_ && !(req.cancel && req.cancel->cancelled())) cv_.wait_for(lk, 5ms);
    return TransportError("cancelled", true);
  }
  void Shutdown() override {
    shutdown_ = true;
    cv_.notify_all();
  }
  bool IsShutdown() const override { return shutdown_; }

  bool WaitFor(const std::function<bool(const std::vector<Seen>&)>& pred,
               std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, timeout, [&] { return pred(seen_); });
  }
  std::vector<Seen> Requests() {
    std::lock_guard<std::mutex> lk(mu_);
    return seen_;
  }

 private:
  Handler handler_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Seen> seen_;
  std::atomic<bool> shutdown_{false};
};

size_t Count(const std::vector<Seen>& seen, const std::string& method) {
  size_t n = 0;
  for (const auto& s : seen) n += s.method == method;
  return n;
}

std::string Field(const std::string& json, const char* a, const char* b = nullptr) {
  rapidjson::Document d;
  d.Parse(json.c_str());
  if (d.HasParseError() || !d.IsObject() || !d.HasMember(a)) return "<none>";
  const rapidjson::Value* v = &d[a];
  if (b) {
    if (!v->IsObject() || !v->HasMember(b)) return "<none>";
    v = &(*v)[b];
  }
  if (v->IsString()) return v->GetString();
  if (v->IsInt()) return std::to_string(v->GetInt());
  return "<other>";
}

// The one set-up of every test here: a Client whose transport is a FakeApi answering with a
// handler (Connect), the fake kept as api_ to read what was sent. The client goes in TearDown,
// before a derived fixture's state that its handler reads.
class FakeApiTest : public ::testing::Test {
 protected:
  Client& Connect(FakeApi::Handler handler) {
    auto owned = std::make_unique<FakeApi>(std::move(handler));
    api_ = owned.get();
    client_ = std::make_unique<Client>(std::move(owned));
    return *client_;
  }
  void TearDown() override { client_.reset(); }

  FakeApi* api_ = nullptr;
  std::unique_ptr<Client> client_;
};

using EventRecorderTest = FakeApiTest;

TEST_F(EventRecorderTest, CreatesTheEventThenAggregatesARepeatIntoACount) {
  Client& client = Connect([](const HttpRequest& req) {
    HttpResponse r;
    r.status = req.method == "POST" ? 201 : 200;
    r.body = req.body.empty() ? "{}" : req.body;
    return r;
  });
  FakeApi* api = api_;
  EventRecorder events(client, EventRecorderOptions{}, nullptr);
  events.Start();
  ObjectReference ref;
  ref.namespace_ = "ns";
  ref.name = "gs-1";
  ref.uid = "u1";
  events.Record(ref, EventType::kWarning, "AllocatingTimedOut", "no confirmation within 2m");
  ASSERT_TRUE(api->WaitFor([](const auto& s) { return Count(s, "POST") == 1; }));
  Seen created = api->Requests().at(0);
  EXPECT_EQ(created.path, "/api/v1/namespaces/ns/events");
  EXPECT_EQ(Field(created.body, "reason"), "AllocatingTimedOut");
  EXPECT_EQ(Field(created.body, "type"), "Warning");
  EXPECT_EQ(Field(created.body, "message"), "no confirmation within 2m");
  EXPECT_EQ(Field(created.body, "involvedObject", "name"), "gs-1");
  EXPECT_EQ(Field(created.body, "involvedObject", "uid"), "u1");
  const std::string name = Field(created.body, "metadata", "name");

  events.Record(ref, EventType::kWarning, "AllocatingTimedOut", "no confirmation within 2m");
  ASSERT_TRUE(api->WaitFor([](const auto& s) { return Count(s, "PATCH") == 1; }));
  Seen patched = api->Requests().at(1);
  EXPECT_EQ(patched.path, "/api/v1/namespaces/ns/events/" + name);
  EXPECT_EQ(Field(patched.body, "count"), "2");
  events.Stop();
  EXPECT_EQ(Count(api->Requests(), "POST"), 1u);  // the repeat made no second Event
}

// The asynchronous verbs send what the blocking ones send and hand the answer (or the API error)
// to `done`, on the transport's executor thread.
TEST_F(FakeApiTest, AsyncVerbsSendTheSameRequestsAsTheBlockingOnes) {
  Client& client = Connect([](const HttpRequest& req) {
    HttpResponse r;
    if (req.method == "GET") {
      r.status = 404;
      r.body = R"({"kind":"Status","code":404,"reason":"NotFound"})";
    } else {
      r.status = req.method == "POST" ? 201 : 200;
      r.body = req.body;
    }
    return r;
  });
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Result<JsonPtr>> answers;
  auto done = [&](Result<JsonPtr> r) {
    std::lock_guard<std::mutex> lk(mu);
    answers.push_back(std::move(r));
    cv.notify_all();
  };
  client.GetAsync(kLeases, "ns", "l", done);
  client.CreateAsync(kLeases, "ns", R"({"a":1})", done);
  client.UpdateAsync(kLeases, "ns", "l", R"({"b":2})", done);
  client.PatchAsync(kLeases, "ns", "l", PatchType::kMerge, R"({"c":3})", done);
  {
    std::unique_lock<std::mutex> lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, 10s, [&] { return answers.size() == 4; }));
    EXPECT_TRUE(!answers[0] && answers[0].error().IsNotFound());
    ASSERT_TRUE(answers[1]);
    EXPECT_EQ(ToJson(**answers[1]), R"({"a":1})");
    ASSERT_TRUE(answers[2]);
    EXPECT_EQ(ToJson(**answers[2]), R"({"b":2})");
    ASSERT_TRUE(answers[3]);
  }
  auto seen = api_->Requests();
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].method, "GET");
  EXPECT_EQ(seen[0].path, "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l");
  EXPECT_EQ(seen[1].method, "POST");
  EXPECT_EQ(seen[1].path, "/apis/coordination.k8s.io/v1/namespaces/ns/leases");
  EXPECT_EQ(seen[2].method, "PUT");
  EXPECT_EQ(seen[2].path, "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l");
  EXPECT_EQ(seen[3].method, "PATCH");
}

// A Lease store: 404 until created, then answers GET with the stored Lease and takes PUTs.
class LeaseStore {
 public:
  HttpResponse Handle(const HttpRequest& req) {
    std::lock_guard<std::mutex> lk(mu_);
    HttpResponse r;
    if (req.method == "GET") {
      if (lease_.empty()) {
        r.status = 404;
        r.body = R"({"kind":"Status","code":404,"reason":"NotFound"})";
      } else {
        r.status = 200;
        r.body = lease_;
      }
      return r;
    }
    if (req.method == "POST" || req.method == "PUT") {
      rapidjson::Document d;
      d.Parse(req.body.c_str());
      d["metadata"].RemoveMember("resourceVersion");
      rapidjson::Value rv(std::to_string(++version_).c_str(), d.GetAllocator());
      d["metadata"].AddMember("resourceVersion", rv, d.GetAllocator());
      lease_ = ToJson(d);
      r.status = req.method == "POST" ? 201 : 200;
      r.body = lease_;
      return r;
    }
    r.status = 405;
    r.body = "{}";
    return r;
  }
  std::string Holder() {
    std::lock_guard<std::mutex> lk(mu_);
    return lease_.empty() ? "<no lease>" : Field(lease_, "spec", "holderIdentity");
  }

 private:
  std::mutex mu_;
  std::string lease_;
  int version_ = 0;
};

// The leader elector's API: a Lease store behind the fake, and the configuration of replica-a
// for Lease ns/lease with the given timings.
class LeaderElectorTest : public FakeApiTest {
 protected:
  void SetUp() override {
    Connect([this](const HttpRequest& req) {
      if (api_down_.load()) {
        HttpResponse r;
        r.status = 500;
        r.body = R"({"kind":"Status","code":500,"reason":"InternalError"})";
        return r;
      }
      return store_.Handle(req);
    });
  }
  static LeaderElectionConfig Config(std::chrono::seconds lease, std::chrono::seconds renew,
                                     std::chrono::milliseconds retry) {
    LeaderElectionConfig cfg;
    cfg.namespace_ = "ns";
    cfg.name = "lease";
    cfg.identity = "replica-a";
    cfg.lease_duration = lease;
    cfg.renew_deadline = renew;
    cfg.retry_period = retry;
    return cfg;
  }

  LeaseStore store_;
  std::atomic<bool> api_down_{false};  // every call answers 500 while set
};

TEST_F(LeaderElectorTest, AcquiresAMissingLeaseLeadsAndReleasesItOnStop) {
  LeaseStore& store = store_;
  FakeApi* api = api_;
  const LeaderElectionConfig cfg = Config(3s, 2s, 100ms);
  std::mutex mu;
  std::condition_variable cv;
  int started = 0, stopped = 0;
  LeaderCallbacks cb;
  cb.on_started_leading = [&] {
    std::lock_guard<std::mutex> lk(mu);
    ++started;
    cv.notify_all();
  };
  cb.on_stopped_leading = [&] {
    std::lock_guard<std::mutex> lk(mu);
    ++stopped;
    cv.notify_all();
  };
  LeaderElector elector(*client_, cfg, cb, nullptr);
  elector.Start();
  {
    std::unique_lock<std::mutex> lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, 10s, [&] { return started == 1; }));
  }
  EXPECT_TRUE(elector.IsLeader());
  EXPECT_EQ(store.Holder(), "replica-a");
  EXPECT_EQ(elector.CurrentLeader(), "replica-a");
  const auto first = api->Requests();
  ASSERT_GE(first.size(), 2u);
  EXPECT_EQ(first[0].method, "GET");
  EXPECT_EQ(first[0].path, "/apis/coordination.k8s.io/v1/namespaces/ns/leases/lease");
  EXPECT_EQ(first[1].method, "POST");  // created, since it did not exist

  // It renews: a PUT of the Lease it holds, still naming itself.
  ASSERT_TRUE(api->WaitFor([](const auto& s) { return Count(s, "PUT") >= 1; }));
  EXPECT_EQ(store.Holder(), "replica-a");

  elector.Stop();
  EXPECT_FALSE(elector.IsLeader());
  {
    std::lock_guard<std::mutex> lk(mu);
    EXPECT_EQ(stopped, 1);
  }
  // Released (no holder): the next replica need not wait for the Lease to expire.
  const std::string holder = store.Holder();
  EXPECT_TRUE(holder.empty() || holder == "<none>") << holder;
}

TEST_F(LeaderElectorTest, DoesNotLeadWhileAnotherReplicaHoldsAFreshLease) {
  LeaseStore& store = store_;
  // Another replica creates the Lease first (a fresh renewTime: it is not expired).
  HttpRequest create;
  create.method = "POST";
  create.body =
      R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease",)"
      R"("metadata":{"name":"lease","namespace":"ns"},)"
      R"("spec":{"holderIdentity":"replica-b","leaseDurationSeconds":60,)"
      R"("acquireTime":"2030-01-01T00:00:00.000000Z","renewTime":"2030-01-01T00:00:00.000000Z",)"
      R"("leaseTransitions":0}})";
  store.Handle(create);
  FakeApi* api = api_;
  const LeaderElectionConfig cfg = Config(60s, 40s, 20ms);
  std::atomic<int> started{0};
  LeaderCallbacks cb;
  cb.on_started_leading = [&] { ++started; };
  LeaderElector elector(*client_, cfg, cb, nullptr);
  elector.Start();
  // Several observations of the Lease (each a GET), and no write of it.
  ASSERT_TRUE(api->WaitFor([](const auto& s) { return Count(s, "GET") >= 3; }));
  elector.Stop();
  EXPECT_EQ(started.load(), 0);
  EXPECT_FALSE(elector.IsLeader());
  EXPECT_EQ(Count(api->Requests(), "PUT") + Count(api->Requests(), "POST"), 0u);
  EXPECT_EQ(elector.CurrentLeader(), "replica-b");
  EXPECT_EQ(store.Holder(), "replica-b");
}

// The leader that cannot renew stops leading once renew_deadline has passed since its last
// renewal (not before), and leads again once the API answers (the Lease is still its own).
TEST_F(LeaderElectorTest, StopsLeadingWhenItCannotRenewWithinTheRenewDeadline) {
  const LeaderElectionConfig cfg = Config(3s, 2s, 100ms);
  std::mutex mu;
  std::condition_variable cv;
  int started = 0, stopped = 0;
  std::chrono::steady_clock::time_point stopped_at;
  LeaderCallbacks cb;
  cb.on_started_leading = [&] {
    std::lock_guard<std::mutex> lk(mu);
    ++started;
    cv.notify_all();
  };
  cb.on_stopped_leading = [&] {
    std::lock_guard<std::mutex> lk(mu);
    ++stopped;
    stopped_at = std::chrono::steady_clock::now();
    cv.notify_all();
  };
  LeaderElector elector(*client_, cfg, cb, nullptr);
  elector.Start();
  {
    std::unique_lock<std::mutex> lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, 10s, [&] { return started == 1; }));
  }
  ASSERT_TRUE(api_->WaitFor([](const auto& s) { return Count(s, "PUT") >= 1; }));
  const auto down_at = std::chrono::steady_clock::now();
  api_down_ = true;
  {
    std::unique_lock<std::mutex> lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, 10s, [&] { return stopped == 1; }));
    // The last renewal was at most one retry period before the API went down.
    EXPECT_GE(stopped_at - down_at, cfg.renew_deadline - cfg.retry_period - 50ms);
  }
  EXPECT_FALSE(elector.IsLeader());
  api_down_ = false;  // the Lease still names replica-a: it renews it and leads again
  {
    std::unique_lock<std::mutex> lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, 10s, [&] { return started == 2; }));
  }
  elector.Stop();
  EXPECT_FALSE(elector.IsLeader());
  std::lock_guard<std::mutex> lk(mu);
  EXPECT_EQ(stopped, 2);
}

// Stop() is idempotent and prompt when not leading, and a stopped elector writes nothing more.
TEST_F(LeaderElectorTest, StopWithoutLeadingWritesNothing) {
  api_down_ = true;
  LeaderElector elector(*client_, Config(3s, 2s, 20ms), LeaderCallbacks{}, nullptr);
  elector.Start();
  ASSERT_TRUE(api_->WaitFor([](const auto& s) { return Count(s, "GET") >= 2; }));
  const auto asked = std::chrono::steady_clock::now();
  elector.Stop();
  elector.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - asked, 1s);
  const size_t after_stop = api_->Requests().size();
  api_down_ = false;
  // A round scheduled before the stop would show up within a few retry periods.
  EXPECT_FALSE(api_->WaitFor([&](const auto& s) { return s.size() > after_stop; }, 200ms));
  EXPECT_EQ(Count(api_->Requests(), "PUT") + Count(api_->Requests(), "POST"), 0u);
}

double CounterValue(prometheus::Registry& registry, const std::string& name,
                    const std::string& result) {
  for (const auto& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const auto& m : family.metric) {
      for (const auto& l : m.label) {
        if (l.name == "result" && l.value == result) return m.counter.value;
      }
    }
  }
  return -1;
}

// The token bucket: with burst 1 and 10 per second, three distinct events take at least two
// refill intervals (the wait is a timer on the I/O executor, not a sleeping thread).
TEST_F(EventRecorderTest, TheTokenBucketSpacesTheSends) {
  Client& client = Connect([](const HttpRequest& req) {
    HttpResponse r;
    r.status = req.method == "POST" ? 201 : 200;
    r.body = req.body.empty() ? "{}" : req.body;
    return r;
  });
  EventRecorderOptions opts;
  opts.qps = 10;
  opts.burst = 1;
  EventRecorder events(client, opts, nullptr);
  events.Start();
  ObjectReference ref;
  ref.namespace_ = "ns";
  ref.name = "gs-1";
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {
    events.Record(ref, EventType::kNormal, "Reason", "message " + std::to_string(i));
  }
  ASSERT_TRUE(api_->WaitFor([](const auto& s) { return Count(s, "POST") >= 1; }));
  ASSERT_TRUE(api_->WaitFor([](const auto& s) { return Count(s, "POST") == 3; }));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 190ms);
  // In order.
  auto seen = api_->Requests();
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(Field(seen.at(i).body, "message"), "message " + std::to_string(i));
  events.Stop();
}

// A full queue drops (and counts) the event; so does Record after Stop; nothing is sent after Stop.
TEST_F(EventRecorderTest, AFullQueueDropsAndCounts) {
  Client& client = Connect([](const HttpRequest& req) {
    HttpResponse r;
    r.status = req.method == "POST" ? 201 : 200;
    r.body = req.body.empty() ? "{}" : req.body;
    return r;
  });
  prometheus::Registry registry;
  EventRecorderOptions opts;
  opts.queue_size = 2;
  EventRecorder events(client, opts, &registry);
  ObjectReference ref;
  ref.namespace_ = "ns";
  ref.name = "gs-1";
  // Not started yet: the queue holds two, the third is dropped.
  for (int i = 0; i < 3; ++i) {
    events.Record(ref, EventType::kNormal, "Reason", "message " + std::to_string(i));
  }
  EXPECT_EQ(CounterValue(registry, "allocating_webhook_kube_events_total", "dropped"), 1);
  events.Start();
  ASSERT_TRUE(api_->WaitFor([](const auto& s) { return Count(s, "POST") == 2; }));
  // The sent counter is bumped on the I/O thread right after the answer.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (CounterValue(registry, "allocating_webhook_kube_events_total", "sent") != 2 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(CounterValue(registry, "allocating_webhook_kube_events_total", "sent"), 2);
  events.Stop();
  events.Record(ref, EventType::kNormal, "Reason", "after stop");
  EXPECT_EQ(CounterValue(registry, "allocating_webhook_kube_events_total", "dropped"), 2);
  EXPECT_FALSE(api_->WaitFor([](const auto& s) { return Count(s, "POST") > 2; }, 100ms));
}

const char* kCrdWithoutAllocating =
    R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",)"
    R"("metadata":{"name":"gameservers.agones.dev","uid":"u","resourceVersion":"1"},)"
    R"("spec":{"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":)"
    R"({"properties":{"status":{"properties":{"state":{"type":"string",)"
    R"("enum":["Ready","Allocated"]}}}}}}}]}})";
const char* kCrdWithAllocating =
    R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",)"
    R"("metadata":{"name":"gameservers.agones.dev","uid":"u","resourceVersion":"2"},)"
    R"("spec":{"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":)"
    R"({"properties":{"status":{"properties":{"state":{"type":"string",)"
    R"("enum":["Ready","Allocated","Allocating"]}}}}}}}]}})";

template <typename F>
bool Eventually(F f, std::chrono::milliseconds timeout = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!f()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(
        5ms);  // the guard publishes from the client's I/O thread: read, not awaited
  }
  return true;
}

// The CRD guard's API: the GameServer CRD, without Allocating in its enum until a PATCH adds it
// (LIST, GET and PATCH of customresourcedefinitions; anything else is 405).
class CrdGuardTest : public FakeApiTest {
 protected:
  void SetUp() override {
    Connect([this](const HttpRequest& req) {
      std::lock_guard<std::mutex> lk(crd_mu_);
      HttpResponse r;
      r.status = 200;
      if (req.method == "GET" && req.path.find("customresourcedefinitions?") != std::string::npos) {
        r.body = R"({"metadata":{"resourceVersion":"1"},"items":[)" + crd_ + "]}";
      } else if (req.method == "GET") {
        r.body = crd_;
      } else if (req.method == "PATCH" && !patch_statuses_.empty()) {
        // A scripted refusal: 422 (the test op failed), 403, 500 ...
        r.status = patch_statuses_.front();
        patch_statuses_.erase(patch_statuses_.begin());
        r.body = R"({"kind":"Status","code":)" + std::to_string(r.status) + R"(,"reason":")" +
                 (r.status == 422   ? "Invalid"
                  : r.status == 403 ? "Forbidden"
                                    : "InternalError") +
                 R"(","message":"scripted"})";
      } else if (req.method == "PATCH") {
        crd_ = kCrdWithAllocating;
        r.body = crd_;
      } else {
        r.status = 405;
        r.body = "{}";
      }
      return r;
    });
  }

  std::mutex crd_mu_;
  std::string crd_ = kCrdWithoutAllocating;
  std::vector<int> patch_statuses_;  // answers to the next PATCHes before the one that applies
};

TEST_F(CrdGuardTest, TheLeaderAddsAllocatingToTheEnumAndThenAcceptsIt) {
  FakeApi* api = api_;
  Client& client = *client_;
  contract::AtomicCrdReadiness readiness(false);
  CrdGuard guard(client, CrdGuardOptions{}, readiness, nullptr);
  guard.SetLeader(true);
  guard.Start();
  ASSERT_TRUE(api->WaitFor([](const auto& s) { return Count(s, "PATCH") == 1; }));
  EXPECT_TRUE(Eventually([&] { return readiness.AcceptsAllocating(); }));
  EXPECT_TRUE(guard.Accepts());
  Seen patch;
  for (const auto& s : api->Requests()) {
    if (s.method == "PATCH") patch = s;
  }
  EXPECT_EQ(patch.path,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gameservers.agones.dev");
  EXPECT_NE(patch.body.find(R"("op":"test")"), std::string::npos) << patch.body;
  EXPECT_NE(patch.body.find(R"("value":"Allocating")"), std::string::npos) << patch.body;
  guard.Stop();
}

TEST_F(CrdGuardTest, AFollowerFailsOpenAndRepairsOnlyOnceItLeads) {
  FakeApi* api = api_;
  Client& client = *client_;
  contract::AtomicCrdReadiness readiness(true);
  CrdGuard guard(client, CrdGuardOptions{}, readiness, nullptr);
  guard.Start();                                                                    // not leading
  ASSERT_TRUE(api->WaitFor([](const auto& s) { return Count(s, "WATCH") >= 1; }));  // listed
  EXPECT_FALSE(readiness.AcceptsAllocating());  // fails open: the CRD lacks Allocating
  EXPECT_EQ(Count(api->Requests(), "PATCH"), 0u);
  guard.SetLeader(true);
  ASSERT_TRUE(api->WaitFor([](const auto& s) { return Count(s, "PATCH") == 1; }));
  EXPECT_TRUE(Eventually([&] { return readiness.AcceptsAllocating(); }));
  guard.Stop();
}

// A failed `test` op (422: the enum changed under us) re-reads the CRD and patches again at once.
TEST_F(CrdGuardTest, ARefusedTestOpReReadsAndPatchesAgain) {
  {
    std::lock_guard<std::mutex> lk(crd_mu_);
    patch_statuses_ = {422};
  }
  FakeApi* api = api_;
  contract::AtomicCrdReadiness readiness(false);
  CrdGuard guard(*client_, CrdGuardOptions{}, readiness, nullptr);
  guard.SetLeader(true);
  guard.Start();
  ASSERT_TRUE(api->WaitFor([](const auto& s) { return Count(s, "PATCH") == 2; }));
  EXPECT_TRUE(Eventually([&] { return readiness.AcceptsAllocating(); }));
  // GET (read), PATCH (refused), GET (re-read), PATCH (applied), in that order.
  std::vector<std::string> repair;
  for (const auto& s : api->Requests()) {
    if (s.method == "PATCH" || (s.method == "GET" && s.path.find('?') == std::string::npos)) {
      repair.push_back(s.method);
    }
  }
  EXPECT_EQ(repair, (std::vector<std::string>{"GET", "PATCH", "GET", "PATCH"}));
  guard.Stop();
}

// Another error backs off (about 500 ms, then 1 s); Stop() during that backoff returns at once
// and nothing more is sent.
TEST_F(CrdGuardTest, StopDuringTheRepairBackoffIsPrompt) {
  {
    std::lock_guard<std::mutex> lk(crd_mu_);
    patch_statuses_ = {500, 500};
  }
  FakeApi* api = api_;
  contract::AtomicCrdReadiness readiness(false);
  CrdGuard guard(*client_, CrdGuardOptions{}, readiness, nullptr);
  guard.SetLeader(true);
  guard.Start();
  // 500, then after the backoff 500 again: the next backoff is running.
  ASSERT_TRUE(api->WaitFor([](const auto& s) { return Count(s, "PATCH") == 2; }));
  EXPECT_FALSE(readiness.AcceptsAllocating());
  auto start = std::chrono::steady_clock::now();
  guard.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  size_t sent = api->Requests().size();
  EXPECT_EQ(Count(api->Requests(), "PATCH"), 2u);
  guard.Stop();  // idempotent
  EXPECT_EQ(api->Requests().size(), sent);
}

}  // namespace
}  // namespace aw::kube
