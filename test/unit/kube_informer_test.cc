// Informer behaviour over a scripted fake transport: paginated list, watch events, an ERROR 410
// event that forces a re-list delivering only the difference, OnAdd/OnUpdate with the old copy and
// resync, and a prompt Stop() during a list, a watch or a backoff; and the Client's asynchronous
// list (paging, an expired continue token) and watch (events, ERROR 410, handler stop) on which
// the informer runs.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "kube/informer.h"
#include "scripted_transport.h"

namespace aw::kube {
namespace {

// A watch chunk that ends the stream with a transport error (the server went away mid-stream).
const std::string kReset = "<reset>";

class FakeTransport final : public test_util::ScriptedTransport {
 public:
  std::deque<std::string> lists;                 // bodies answered to list requests, in order
  std::deque<std::vector<std::string>> watches;  // chunks streamed per watch, in order
  std::vector<std::string> paths;                // every request path seen

  Result<HttpResponse> Do(const HttpRequest& req) override {
    std::lock_guard<std::mutex> lk(mu_);
    paths.push_back(req.path);
    if (lists.empty()) return TransportError("no scripted list");
    HttpResponse r;
    r.status = 200;
    r.body = lists.front();
    lists.pop_front();
    return r;
  }
  Result<HttpResponse> Stream(const HttpRequest& req,
                              const std::function<bool(std::string_view)>& on_data) override {
    std::vector<std::string> chunks;
    {
      std::lock_guard<std::mutex> lk(mu_);
      paths.push_back(req.path);
      if (!watches.empty()) {
        chunks = watches.front();
        watches.pop_front();
      }
    }
    HttpResponse r;
    r.status = 200;
    if (!chunks.empty()) {
      for (const auto& c : chunks) {
        if (c == kReset) return TransportError("read failed: connection reset by peer");
        if (!on_data(c)) return r;
      }
      return r;
    }
    // Nothing scripted: an idle watch that only ends when cancelled.
    while (!shutdown_ && !(req.cancel && req.cancel->cancelled())) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return TransportError("cancelled", true);
  }
  // hold_lists: DoAsync answers nothing until the call is cancelled (a list in flight), from a
  // helper thread of this fake.
  void DoAsync(const HttpRequest& req, Done done) override {
    if (!hold_lists) return ScriptedTransport::DoAsync(req, std::move(done));
    {
      std::lock_guard<std::mutex> lk(mu_);
      paths.push_back(req.path);
    }
    Cancellation* cancel = req.cancel;
    std::lock_guard<std::mutex> lk(mu_);
    held_.emplace_back([this, cancel, done = std::move(done)] {
      while (!shutdown_ && !(cancel && cancel->cancelled())) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      done(TransportError("cancelled", true));
    });
  }
  ~FakeTransport() override {
    shutdown_ = true;
    for (auto& t : held_) t.join();
  }
  void Shutdown() override { shutdown_ = true; }
  bool IsShutdown() const override { return shutdown_; }
  std::vector<std::string> Paths() {
    std::lock_guard<std::mutex> lk(mu_);
    return paths;
  }
  size_t NumPaths() {
    std::lock_guard<std::mutex> lk(mu_);
    return paths.size();
  }
  std::atomic<bool> hold_lists{false};

 private:
  std::mutex mu_;
  std::atomic<bool> shutdown_{false};
  std::vector<std::thread> held_;
};

// Waits (bounded) until `pred` holds, checking every few milliseconds.
bool Eventually(const std::function<bool()>& pred) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

class Recorder : public InformerHandler {
 public:
  void OnAdd(const ObjectPtr& o) override { Add("upsert " + o->name + "@" + o->resource_version); }
  void OnUpdate(const ObjectPtr& old, const ObjectPtr& o) override {
    Add("upsert " + o->name + "@" + o->resource_version);
    Add("old " + old->name + "@" + old->resource_version, /*update=*/true);
  }
  void OnDelete(const ObjectPtr& o) override { Add("delete " + o->name); }
  void OnSynced() override { Add("synced"); }
  bool WaitForSyncs(int n) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, std::chrono::seconds(20), [&] {
      int c = 0;
      for (const auto& e : events_) c += e == "synced";
      return c >= n;
    });
  }
  std::vector<std::string> Events() {
    std::lock_guard<std::mutex> lk(mu_);
    return events_;
  }
  std::vector<std::string> Updates() {
    std::lock_guard<std::mutex> lk(mu_);
    return updates_;
  }
  bool WaitForEvents(size_t n) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, std::chrono::seconds(20), [&] { return events_.size() >= n; });
  }

 private:
  // The old copies OnUpdate saw go to Updates(), apart from Events() (the sequence of changes).
  void Add(std::string e, bool update = false) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      (update ? updates_ : events_).push_back(std::move(e));
    }
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> events_;
  std::vector<std::string> updates_;
};

std::string Obj(const std::string& name, const std::string& rv) {
  return R"({"metadata":{"namespace":"ns","name":")" + name + R"(","uid":"u-)" + name +
         R"(","resourceVersion":")" + rv + R"("}})";
}

std::string Ev(const std::string& type, const std::string& obj) {
  return R"({"type":")" + type + R"(","object":)" + obj + "}\n";
}

TEST(InformerTest, ListWatchExpiryRelistDeliversOnlyTheDifference) {
  auto owned = std::make_unique<FakeTransport>();
  FakeTransport* t = owned.get();
  // First list in two pages.
  t->lists.push_back(R"({"metadata":{"resourceVersion":"10","continue":"tok"},"items":[)" +
                     Obj("a", "1") + "," + Obj("b", "2") + "]}");
  t->lists.push_back(R"({"metadata":{"resourceVersion":"10"},"items":[)" + Obj("c", "3") + "]}");
  // Watch: one event split across chunks, one ADDED, then 410 as an ERROR event.
  std::string modified = Ev("MODIFIED", Obj("a", "11"));
  t->watches.push_back(
      {modified.substr(0, 17), modified.substr(17) + Ev("ADDED", Obj("d", "12")),
       Ev("BOOKMARK", R"({"metadata":{"resourceVersion":"13"}})"),
       R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}})"
       "\n"});
  // Re-list: a and d unchanged, b changed, e new, c gone.
  t->lists.push_back(R"({"metadata":{"resourceVersion":"22"},"items":[)" + Obj("a", "11") + "," +
                     Obj("b", "20") + "," + Obj("d", "12") + "," + Obj("e", "21") + "]}");
  Client client(std::move(owned));
  InformerOptions o;
  o.name = "test";
  o.resource = kGameServers;
  o.namespace_ = "ns";
  o.label_selector = "allocating.agones.dev/enabled=true";
  o.page_size = 2;
  o.backoff_initial = std::chrono::milliseconds(1);
  Informer inf(client, o);
  Recorder rec;
  inf.AddHandler(&rec);
  inf.Start();
  ASSERT_TRUE(rec.WaitForSyncs(2)) << ::testing::PrintToString(rec.Events());
  auto stop_start = std::chrono::steady_clock::now();
  inf.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - stop_start, std::chrono::seconds(3));

  std::vector<std::string> want = {"upsert a@1",  "upsert b@2",  "upsert c@3",  "synced",
                                   "upsert a@11", "upsert d@12", "upsert b@20", "upsert e@21",
                                   "delete c",    "synced"};
  EXPECT_EQ(rec.Events(), want);
  auto snap = inf.Snapshot();
  ASSERT_EQ(snap.size(), 4u);
  EXPECT_EQ(inf.Get("ns", "b")->resource_version, "20");
  EXPECT_EQ(inf.Get("ns", "c"), nullptr);

  auto paths = t->Paths();
  ASSERT_GE(paths.size(), 5u);
  EXPECT_NE(paths[0].find("labelSelector=allocating.agones.dev%2Fenabled%3Dtrue"),
            std::string::npos)
      << paths[0];
  EXPECT_NE(paths[0].find("limit=2"), std::string::npos) << paths[0];
  EXPECT_NE(paths[1].find("continue=tok"), std::string::npos) << paths[1];
  EXPECT_NE(paths[2].find("watch=true"), std::string::npos) << paths[2];
  EXPECT_NE(paths[2].find("resourceVersion=10"), std::string::npos) << paths[2];
  EXPECT_NE(paths[2].find("allowWatchBookmarks=true"), std::string::npos) << paths[2];
  // After the re-list the watch resumes from the new list's resourceVersion.
  EXPECT_NE(paths[4].find("resourceVersion=22"), std::string::npos) << paths[4];
}

TEST(InformerTest, WatchEndResumesFromLastResourceVersion) {
  auto owned = std::make_unique<FakeTransport>();
  FakeTransport* t = owned.get();
  t->lists.push_back(R"({"metadata":{"resourceVersion":"5"},"items":[]})");
  // A watch that ends normally (server timeout) after a bookmark: resume from the bookmark.
  t->watches.push_back(
      {Ev("ADDED", Obj("x", "6")), Ev("BOOKMARK", R"({"metadata":{"resourceVersion":"9"}})")});
  t->watches.push_back({Ev("DELETED", Obj("x", "10"))});
  Client client(std::move(owned));
  InformerOptions o;
  o.resource = kGameServers;
  o.backoff_initial = std::chrono::milliseconds(1);
  Informer inf(client, o);
  Recorder rec;
  inf.AddHandler(&rec);
  inf.Start();
  ASSERT_TRUE(rec.WaitForSyncs(1));
  // Wait for the delete (second watch) to arrive.
  for (int i = 0; i < 2000 && rec.Events().size() < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  inf.Stop();
  EXPECT_EQ(rec.Events(), (std::vector<std::string>{"synced", "upsert x@6", "delete x"}));
  auto paths = t->Paths();
  ASSERT_GE(paths.size(), 3u);
  EXPECT_NE(paths[2].find("resourceVersion=9"), std::string::npos) << paths[2];
}

// A watch whose connection is reset after some events (kube-apiserver restarting): the next watch
// resumes after the last event applied, so none of them is delivered twice.
TEST(InformerTest, ResetWatchResumesAfterTheLastEventApplied) {
  auto owned = std::make_unique<FakeTransport>();
  FakeTransport* t = owned.get();
  t->lists.push_back(R"({"metadata":{"resourceVersion":"5"},"items":[]})");
  t->watches.push_back({Ev("ADDED", Obj("x", "6")), Ev("MODIFIED", Obj("x", "7")), kReset});
  t->watches.push_back({Ev("MODIFIED", Obj("x", "8"))});
  Client client(std::move(owned));
  InformerOptions o;
  o.resource = kGameServers;
  o.backoff_initial = std::chrono::milliseconds(1);
  Informer inf(client, o);
  Recorder rec;
  inf.AddHandler(&rec);
  inf.Start();
  ASSERT_TRUE(rec.WaitForSyncs(1));
  for (int i = 0; i < 2000 && rec.Events().size() < 4; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  inf.Stop();
  EXPECT_EQ(rec.Events(),
            (std::vector<std::string>{"synced", "upsert x@6", "upsert x@7", "upsert x@8"}));
  auto paths = t->Paths();
  ASSERT_GE(paths.size(), 3u);
  EXPECT_NE(paths[2].find("resourceVersion=7"), std::string::npos) << paths[2];
}

// OnUpdate carries the cached copy it replaces; a resync re-delivers every object as
// OnUpdate(obj, obj).
TEST(InformerTest, UpdateCarriesTheOldCopyAndResyncRedeliversTheSame) {
  auto owned = std::make_unique<FakeTransport>();
  FakeTransport* t = owned.get();
  t->lists.push_back(R"({"metadata":{"resourceVersion":"5"},"items":[)" + Obj("x", "1") + "]}");
  t->watches.push_back({Ev("MODIFIED", Obj("x", "6"))});
  // Then short watches (a bookmark each, restarted after a backoff of at most 50 ms): the resync
  // is checked at each, and comes due after 1 s.
  for (int i = 0; i < 200; ++i) {
    t->watches.push_back({Ev("BOOKMARK", R"({"metadata":{"resourceVersion":"6"}})")});
  }
  Client client(std::move(owned));
  InformerOptions o;
  o.resource = kGameServers;
  o.backoff_initial = std::chrono::milliseconds(1);
  o.backoff_max = std::chrono::milliseconds(50);
  o.resync = std::chrono::seconds(1);
  Informer inf(client, o);
  Recorder rec;
  inf.AddHandler(&rec);
  inf.Start();
  ASSERT_TRUE(rec.WaitForSyncs(1));
  ASSERT_TRUE(Eventually([&] { return rec.Updates().size() >= 2; }))
      << ::testing::PrintToString(rec.Updates());
  inf.Stop();
  auto updates = rec.Updates();
  EXPECT_EQ(updates[0], "old x@1");  // the MODIFIED event replaced x@1
  EXPECT_EQ(updates[1], "old x@6");  // the resync: OnUpdate(x@6, x@6)
  auto events = rec.Events();
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events[0], "upsert x@1");
  EXPECT_EQ(events[2], "upsert x@6");
  EXPECT_EQ(events[3], "upsert x@6");
}

// Stop() while the list is in flight cancels it and returns at once; nothing is delivered.
TEST(InformerTest, StopDuringAListCancelsIt) {
  auto owned = std::make_unique<FakeTransport>();
  FakeTransport* t = owned.get();
  t->hold_lists = true;
  Client client(std::move(owned));
  InformerOptions o;
  o.resource = kGameServers;
  Informer inf(client, o);
  Recorder rec;
  inf.AddHandler(&rec);
  inf.Start();
  ASSERT_TRUE(Eventually([&] { return t->NumPaths() >= 1; }));
  auto start = std::chrono::steady_clock::now();
  inf.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_FALSE(inf.HasSynced());
  EXPECT_FALSE(inf.WaitForSync(std::chrono::milliseconds(1)));
  EXPECT_TRUE(rec.Events().empty());
  inf.Stop();  // idempotent
}

// Stop() while the watch is open (nothing scripted: it only ends when cancelled).
TEST(InformerTest, StopDuringAWatchCancelsIt) {
  auto owned = std::make_unique<FakeTransport>();
  FakeTransport* t = owned.get();
  t->lists.push_back(R"({"metadata":{"resourceVersion":"5"},"items":[)" + Obj("x", "1") + "]}");
  Client client(std::move(owned));
  InformerOptions o;
  o.resource = kGameServers;
  Informer inf(client, o);
  Recorder rec;
  inf.AddHandler(&rec);
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(20)));
  ASSERT_TRUE(Eventually([&] { return t->NumPaths() >= 2; }));  // the watch is open
  auto start = std::chrono::steady_clock::now();
  inf.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(rec.Events(), (std::vector<std::string>{"upsert x@1", "synced"}));
  EXPECT_EQ(t->NumPaths(), 2u);            // no re-watch after the cancelled one
  EXPECT_NE(inf.Get("ns", "x"), nullptr);  // the cache stays readable
}

// Stop() during the backoff after a failed list (a timer of an hour) returns at once.
TEST(InformerTest, StopDuringTheBackoffCancelsTheTimer) {
  auto owned = std::make_unique<FakeTransport>();
  FakeTransport* t = owned.get();  // nothing scripted: every list fails
  Client client(std::move(owned));
  InformerOptions o;
  o.resource = kGameServers;
  o.backoff_initial = std::chrono::hours(1);
  o.backoff_max = std::chrono::hours(1);
  Informer inf(client, o);
  inf.Start();
  ASSERT_TRUE(Eventually([&] { return t->NumPaths() >= 1; }));
  auto start = std::chrono::steady_clock::now();
  inf.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(t->NumPaths(), 1u);
  EXPECT_FALSE(inf.HasSynced());
}

// ListAllAsync follows continue tokens; an expired token restarts once without a limit.
TEST(ClientAsyncTest, ListAllAsyncPagesAndRestartsOnAnExpiredContinueToken) {
  auto owned = std::make_unique<FakeTransport>();
  FakeTransport* t = owned.get();
  t->lists.push_back(R"({"metadata":{"resourceVersion":"7","continue":"tok1"},"items":[)" +
                     Obj("a", "1") + "]}");
  t->lists.push_back(R"({"metadata":{"resourceVersion":"7","continue":"tok2"},"items":[)" +
                     Obj("b", "2") + "]}");
  Client client(std::move(owned));
  ListOptions lo;
  lo.limit = 1;
  std::promise<Result<ListResult>> got;
  client.ListAllAsync(kGameServers, "ns", lo,
                      [&](Result<ListResult> r) { got.set_value(std::move(r)); });
  auto res = got.get_future().get();
  // The third page is unscripted: a transport error, not an expiry.
  ASSERT_FALSE(res.ok());
  EXPECT_TRUE(res.error().IsTransport());
  auto paths = t->Paths();
  ASSERT_EQ(paths.size(), 3u);
  EXPECT_NE(paths[0].find("limit=1"), std::string::npos) << paths[0];
  EXPECT_NE(paths[1].find("continue=tok1"), std::string::npos) << paths[1];
  EXPECT_NE(paths[2].find("continue=tok2"), std::string::npos) << paths[2];

  // Now: page 1, then 410 on the continue token, then one unpaginated list.
  auto owned2 = std::make_unique<FakeTransport>();
  FakeTransport* t2 = owned2.get();
  class Expiring final : public test_util::ScriptedTransport {
   public:
    explicit Expiring(FakeTransport* f) : f_(f) {}
    Result<HttpResponse> Do(const HttpRequest& req) override {
      if (req.path.find("continue=") != std::string::npos) {
        f_->paths.push_back(req.path);
        HttpResponse r;
        r.status = 410;
        r.body = R"({"kind":"Status","code":410,"reason":"Expired","message":"too old"})";
        return r;
      }
      return f_->Do(req);
    }
    Result<HttpResponse> Stream(const HttpRequest& req,
                                const std::function<bool(std::string_view)>& d) override {
      return f_->Stream(req, d);
    }
    void Shutdown() override { f_->Shutdown(); }
    bool IsShutdown() const override { return f_->IsShutdown(); }

   private:
    FakeTransport* f_;
  };
  t2->lists.push_back(R"({"metadata":{"resourceVersion":"7","continue":"tok"},"items":[)" +
                      Obj("a", "1") + "]}");
  t2->lists.push_back(R"({"metadata":{"resourceVersion":"9"},"items":[)" + Obj("a", "1") + "," +
                      Obj("b", "8") + "]}");
  Client client2(std::make_unique<Expiring>(t2));
  std::promise<Result<ListResult>> got2;
  client2.ListAllAsync(kGameServers, "ns", lo,
                       [&](Result<ListResult> r) { got2.set_value(std::move(r)); });
  auto res2 = got2.get_future().get();
  ASSERT_TRUE(res2.ok()) << res2.error().ToString();
  EXPECT_EQ(res2->items.size(), 2u);  // only the restarted list's items
  EXPECT_EQ(res2->resource_version, "9");
  EXPECT_EQ(res2->pages, 1);
  auto paths2 = t2->Paths();
  ASSERT_EQ(paths2.size(), 3u);
  EXPECT_EQ(paths2[2].find("limit="), std::string::npos) << paths2[2];
  EXPECT_EQ(paths2[2].find("continue="), std::string::npos) << paths2[2];
}

// WatchAsync: events in order on the I/O executor, the end rules of Watch().
TEST(ClientAsyncTest, WatchAsyncDeliversEventsAndEndsLikeWatch) {
  auto owned = std::make_unique<FakeTransport>();
  FakeTransport* t = owned.get();
  std::string added = Ev("ADDED", Obj("a", "3"));
  // 1: split event + bookmark, normal end => the bookmark's resourceVersion.
  t->watches.push_back({added.substr(0, 10), added.substr(10),
                        Ev("BOOKMARK", R"({"metadata":{"resourceVersion":"4"}})")});
  // 2: an ERROR 410 event => IsExpired().
  t->watches.push_back(
      {Ev("MODIFIED", Obj("a", "5")),
       R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"gone"}})"
       "\n"});
  // 3: the handler stops after the first event => that event's resourceVersion.
  t->watches.push_back({Ev("MODIFIED", Obj("a", "6")) + Ev("MODIFIED", Obj("a", "7"))});
  Client client(std::move(owned));
  auto watch = [&](bool stop_after_one, std::vector<std::string>* seen) {
    std::promise<Result<std::string>> got;
    WatchOptions wo;
    wo.resource_version = "2";
    client.WatchAsync(
        kGameServers, "ns", wo,
        [&, stop_after_one](WatchEvent& ev) {
          seen->push_back(std::string(WatchEventTypeName(ev.type)) + " " +
                          MetaString(*ev.object, "resourceVersion"));
          return !stop_after_one;
        },
        [&](Result<std::string> r) { got.set_value(std::move(r)); });
    return got.get_future().get();
  };
  std::vector<std::string> seen1, seen2, seen3;
  auto r1 = watch(false, &seen1);
  ASSERT_TRUE(r1.ok()) << r1.error().ToString();
  EXPECT_EQ(*r1, "4");
  EXPECT_EQ(seen1, (std::vector<std::string>{"ADDED 3", "BOOKMARK 4"}));
  auto r2 = watch(false, &seen2);
  ASSERT_FALSE(r2.ok());
  EXPECT_TRUE(r2.error().IsExpired());
  EXPECT_EQ(seen2, (std::vector<std::string>{"MODIFIED 5"}));
  auto r3 = watch(true, &seen3);
  ASSERT_TRUE(r3.ok()) << r3.error().ToString();
  EXPECT_EQ(*r3, "6");
  EXPECT_EQ(seen3, (std::vector<std::string>{"MODIFIED 6"}));
  auto paths = t->Paths();
  ASSERT_EQ(paths.size(), 3u);
  EXPECT_NE(paths[0].find("watch=true"), std::string::npos) << paths[0];
  EXPECT_NE(paths[0].find("resourceVersion=2"), std::string::npos) << paths[0];
}

// A cancelled or shut-down watch ends with a cancelled error.
TEST(ClientAsyncTest, WatchAsyncEndsCancelledOnCancellationAndShutdown) {
  auto owned = std::make_unique<FakeTransport>();
  FakeTransport* t = owned.get();
  Client client(std::move(owned));
  Cancellation cancel;
  WatchOptions wo;
  wo.cancel = &cancel;
  std::promise<Result<std::string>> got;
  client.WatchAsync(
      kGameServers, "", wo, [](WatchEvent&) { return true; },
      [&](Result<std::string> r) { got.set_value(std::move(r)); });
  ASSERT_TRUE(Eventually([&] { return t->NumPaths() >= 1; }));
  cancel.Cancel();
  auto r = got.get_future().get();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error().cancelled);

  std::promise<Result<std::string>> got2;
  client.WatchAsync(
      kGameServers, "", WatchOptions{}, [](WatchEvent&) { return true; },
      [&](Result<std::string> r2) { got2.set_value(std::move(r2)); });
  ASSERT_TRUE(Eventually([&] { return t->NumPaths() >= 2; }));
  client.Shutdown();
  auto r2 = got2.get_future().get();
  ASSERT_FALSE(r2.ok());
  EXPECT_TRUE(r2.error().cancelled);
}

}  // namespace
}  // namespace aw::kube

namespace aw::kube {
namespace {

std::string GsObj(const std::string& name, const std::string& rv, const std::string& state) {
  return R"({"metadata":{"namespace":"ns","name":")" + name + R"(","uid":"u-)" + name +
         R"(","resourceVersion":")" + rv +
         R"(","labels":{"allocating.agones.dev/enabled":"true"},"managedFields":[{"manager":"m"}]},)"
         R"("spec":{"template":{"spec":{"containers":[{"name":"c"}]}}},"status":{"state":")" +
         state + R"(","ports":[{"name":"default","port":7000}]}})";
}

// The compact GameServer cache gives its handlers the same changes as the document cache, from
// pages applied one at a time, and holds the records (no documents).
TEST(InformerGameServerTest, SameChangesAsTheDocumentPathWithoutDocuments) {
  auto owned = std::make_unique<FakeTransport>();
  FakeTransport* t = owned.get();
  t->lists.push_back(R"({"metadata":{"resourceVersion":"10","continue":"tok"},"items":[)" +
                     GsObj("a", "1", "Ready") + "," + GsObj("b", "2", "Ready") + "]}");
  t->lists.push_back(R"({"metadata":{"resourceVersion":"10"},"items":[)" +
                     GsObj("c", "3", "Ready") + "]}");
  std::string modified = Ev("MODIFIED", GsObj("a", "11", "Allocating"));
  t->watches.push_back(
      {modified.substr(0, 17), modified.substr(17) + Ev("ADDED", GsObj("d", "12", "Ready")),
       Ev("BOOKMARK", R"({"metadata":{"resourceVersion":"13"}})"),
       R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}})"
       "\n"});
  t->lists.push_back(R"({"metadata":{"resourceVersion":"22"},"items":[)" +
                     GsObj("a", "11", "Allocating") + "," + GsObj("b", "20", "Ready") + "," +
                     GsObj("d", "12", "Ready") + "," + GsObj("e", "21", "Ready") + "]}");
  Client client(std::move(owned));
  prometheus::Registry registry;
  InformerOptions o;
  o.name = "gs";
  o.resource = kGameServers;
  o.namespace_ = "ns";
  o.page_size = 2;
  o.backoff_initial = std::chrono::milliseconds(1);
  o.decode = InformerOptions::Decode::kGameServer;
  Informer inf(client, o, &registry);
  Recorder rec;
  inf.AddHandler(&rec);
  inf.Start();
  ASSERT_TRUE(rec.WaitForSyncs(2)) << ::testing::PrintToString(rec.Events());
  inf.Stop();
  std::vector<std::string> want = {"upsert a@1",  "upsert b@2",  "upsert c@3",  "synced",
                                   "upsert a@11", "upsert d@12", "upsert b@20", "upsert e@21",
                                   "delete c",    "synced"};
  EXPECT_EQ(rec.Events(), want);
  ASSERT_EQ(inf.Size(), 4u);
  ObjectPtr a = inf.Get("ns", "a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->doc, nullptr) << "the compact cache keeps no document";
  EXPECT_EQ(a->state, "Allocating");
  EXPECT_TRUE(a->OptedIn());
  ASSERT_EQ(a->ports.size(), 1u);
  EXPECT_EQ(a->ports[0].port, 7000);
  EXPECT_GT(inf.Bytes(), 4 * sizeof(CachedObject));
  auto paths = t->Paths();
  ASSERT_GE(paths.size(), 5u);
  EXPECT_NE(paths[1].find("continue=tok"), std::string::npos) << paths[1];
  EXPECT_NE(paths[4].find("resourceVersion=22"), std::string::npos) << paths[4];
  const std::string text = prometheus::TextSerializer().Serialize(registry.Collect());
  EXPECT_NE(text.find("allocating_webhook_kube_informer_objects{informer=\"gs\"} 4"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("allocating_webhook_kube_informer_bytes{informer=\"gs\"}"),
            std::string::npos);
  EXPECT_NE(text.find("allocating_webhook_kube_watch_events_skipped_total{informer=\"gs\",reason="
                      "\"oversized\"} 0"),
            std::string::npos)
      << "the skip counters exist from the start, at 0";
}

// Bad watch lines (not JSON, truncated, oversized, not a GameServer) are skipped with a metric and
// never stop the watch: the events after them are applied; the watch's next end re-lists.
TEST(InformerGameServerTest, BadEventsAreSkippedAndTheWatchGoesOn) {
  auto owned = std::make_unique<FakeTransport>();
  FakeTransport* t = owned.get();
  t->lists.push_back(R"({"metadata":{"resourceVersion":"5"},"items":[)" + GsObj("a", "1", "Ready") +
                     ",7]}");
  std::string big = Ev("MODIFIED", GsObj("a", "6", "Ready"));
  big.insert(big.size() - 3, ",\"pad\":\"" + std::string(3000, 'x') + "\"");
  t->watches.push_back({"not json\n",
                        R"({"type":"MODIFIED","object":{"metadata":{"name":"a")"
                        "\n",
                        big.substr(0, 1000), big.substr(1000),
                        Ev("MODIFIED", "{\"metadata\":{\"namespace\":\"ns\"}}"),
                        Ev("ADDED", GsObj("b", "7", "Ready")),
                        Ev("MODIFIED", GsObj("a", "8", "Allocating"))});
  // The re-list after the skipped events: the server's state.
  t->lists.push_back(R"({"metadata":{"resourceVersion":"9"},"items":[)" +
                     GsObj("a", "8", "Allocating") + "," + GsObj("b", "7", "Ready") + "]}");
  Client client(std::move(owned));
  prometheus::Registry registry;
  InformerOptions o;
  o.name = "gs";
  o.resource = kGameServers;
  o.backoff_initial = std::chrono::milliseconds(1);
  o.decode = InformerOptions::Decode::kGameServer;
  o.max_event_bytes = 2048;
  Informer inf(client, o, &registry);
  Recorder rec;
  inf.AddHandler(&rec);
  inf.Start();
  ASSERT_TRUE(rec.WaitForSyncs(2)) << ::testing::PrintToString(rec.Events());
  inf.Stop();
  std::vector<std::string> want = {"upsert a@1", "synced", "upsert b@7", "upsert a@8", "synced"};
  EXPECT_EQ(rec.Events(), want);
  const std::string text = prometheus::TextSerializer().Serialize(registry.Collect());
  for (const char* line : {"allocating_webhook_kube_watch_events_skipped_total{informer=\"gs\","
                           "reason=\"undecodable\"} 2",
                           "allocating_webhook_kube_watch_events_skipped_total{informer=\"gs\","
                           "reason=\"oversized\"} 1",
                           "allocating_webhook_kube_watch_events_skipped_total{informer=\"gs\","
                           "reason=\"not_a_gameserver\"} 2"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  auto paths = t->Paths();
  ASSERT_GE(paths.size(), 3u);
  EXPECT_NE(paths[1].find("watch=true"), std::string::npos) << paths[1];
  // The re-list, not a resumed watch, follows the stream's end.
  EXPECT_EQ(paths[2].find("watch=true"), std::string::npos) << paths[2];
}

}  // namespace
}  // namespace aw::kube
