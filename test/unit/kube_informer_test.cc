// Informer behaviour over a scripted fake transport: paginated list, watch events, an ERROR 410
// event that forces a re-list delivering only the difference, and a prompt Stop().
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "kube/informer.h"

namespace aw::kube {
namespace {

// A watch chunk that ends the stream with a transport error (the server went away mid-stream).
const std::string kReset = "<reset>";

class FakeTransport final : public Transport {
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
  void Shutdown() override { shutdown_ = true; }
  bool IsShutdown() const override { return shutdown_; }
  std::vector<std::string> Paths() {
    std::lock_guard<std::mutex> lk(mu_);
    return paths;
  }

 private:
  std::mutex mu_;
  std::atomic<bool> shutdown_{false};
};

class Recorder : public InformerHandler {
 public:
  void OnUpsert(const ObjectPtr& o) override {
    Add("upsert " + o->name + "@" + o->resource_version);
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

 private:
  void Add(std::string e) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      events_.push_back(std::move(e));
    }
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> events_;
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

}  // namespace
}  // namespace aw::kube
