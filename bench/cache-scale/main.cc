// bench/cache-scale: the GameServer cache at Agones' scale, without an API server.
//
// Replays a list (pages of 500, as the informer asks) and a watch stream of N opted-in GameServers
// shaped like Agones' (test/fixtures/objects/gameserver-allocating-sdk-ready.json with its pod
// template, ports, addresses, counters and lists, managedFields of three managers; names, uids,
// nodes, fleets and timestamps varied) into a kube::Informer through a fake transport that makes
// each page's bytes when asked (the replay itself holds one page), and prints, for one decode mode
// (compact: the caches' kGameServer; document: the whole-document cache it replaced):
//   rss_idle_mib      the process before the informer starts (the replay's code and fixture)
//   rss_synced_mib    after the list was applied (malloc_trim'd, as a long-lived process settles)
//   bytes_per_server  (synced - idle) / N
//   gauge_bytes_per_server  what allocating_webhook_kube_informer_bytes says, / N
//   list_peak_mib     the peak RSS (VmHWM) of the first list
//   relist_peak_mib   the peak RSS (VmHWM, reset before) while E watch events are applied and a
//                     410 then forces a full re-list in which every server changed, and its ratio
//                     to rss_synced
//   list_seconds / relist_seconds  wall time of the first list and of the re-list
//   events_per_second the watch's MODIFIED events applied per second (one core)
// Usage: cache_scale_bench --servers N [--mode compact|document] [--events E]
// bench/cache-scale/run runs it for 1k, 10k, 20k and 100k servers in both modes. Linux only.
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "../../test/unit/scripted_transport.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "util/io/log.h"

namespace {

using namespace aw;
using Clock = std::chrono::steady_clock;

double StatusKb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(field, 0) == 0) return std::atof(line.c_str() + std::strlen(field));
  }
  return 0;
}
double RssMib() { return StatusKb("VmRSS:") / 1024.0; }
double HwmMib() { return StatusKb("VmHWM:") / 1024.0; }
void ResetHwm() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The fixture, compact, with a third manager's managedFields, as a template with placeholders.
class Shape {
 public:
  explicit Shape(const std::string& fixture_path) {
    std::string t = ReadFile(fixture_path);
    std::string compact;
    bool in_string = false, esc = false;
    for (char c : t) {  // strip the whitespace outside strings
      if (in_string) {
        compact += c;
        if (esc) {
          esc = false;
        } else if (c == '\\') {
          esc = true;
        } else if (c == '"') {
          in_string = false;
        }
      } else if (c == '"') {
        in_string = true;
        compact += c;
      } else if (!std::isspace(static_cast<unsigned char>(c))) {
        compact += c;
      }
    }
    const std::string third =
        R"({"apiVersion":"agones.dev/v1","fieldsType":"FieldsV1","manager":"allocator","operation":"Update","time":"2026-12-02T14:23:13Z","fieldsV1":{"f:metadata":{"f:annotations":{"f:agones.dev/last-allocated":{}},"f:labels":{"f:match":{}}},"f:status":{"f:state":{}}}},)";
    size_t mf = compact.find("\"managedFields\":[");
    if (mf == std::string::npos) {
      std::fprintf(stderr, "fixture has no managedFields\n");
      std::exit(2);
    }
    compact.insert(mf + std::strlen("\"managedFields\":["), third);
    text_ = compact;
  }
  // The i-th server at version `rv`.
  std::string Make(size_t i, uint64_t rv) const {
    std::string s = text_;
    char name[64], uid[64], node[64], fleet[32], cid[80];
    std::snprintf(name, sizeof name, "xonotic-%02zu-%06zu", i % 10, i);
    std::snprintf(uid, sizeof uid, "4c0d7a52-9f0e-4a8b-8e53-%012zx", i);
    std::snprintf(node, sizeof node, "gke-agones-default-pool-3f2a1b0c-n%03zu", i % 200);
    std::snprintf(fleet, sizeof fleet, "xonotic-%02zu", i % 10);
    std::snprintf(cid, sizeof cid, "containerd://%064zx", i * 2654435761u);
    Replace(&s, "\"xonotic-8k2vq-7tq2m\"", std::string("\"") + name + "\"");
    Replace(&s, "\"4c0d7a52-9f0e-4a8b-8e53-2a1b6f3d9c01\"", std::string("\"") + uid + "\"");
    Replace(&s, "\"184470\"", "\"" + std::to_string(rv) + "\"");
    ReplaceAll(&s, "gke-agones-default-pool-3f2a1b0c-x9z8", node);
    Replace(&s, "\"agones.dev/fleet\":\"xonotic\"",
            std::string("\"agones.dev/fleet\":\"") + fleet + "\"");
    ReplaceAll(&s, "containerd://5d1c0f7e3b2a49d8a61f0c4b7e9d2a11c3f5e7b9d0a2c4e6f8a1b3c5d7e9f0a2",
               cid);
    // Timestamps of each server's own allocation.
    char ts[40];
    std::snprintf(ts, sizeof ts, "2026-12-02T14:%02zu:%02zu.%09zuZ", (i / 60) % 60, i % 60,
                  static_cast<size_t>(rv % 1000000000));
    ReplaceAll(&s, "2026-12-02T14:23:13.123456789Z", ts);
    return s;
  }
  size_t size() const { return text_.size(); }

 private:
  static void Replace(std::string* s, const std::string& a, const std::string& b) {
    size_t p = s->find(a);
    if (p != std::string::npos) s->replace(p, a.size(), b);
  }
  static void ReplaceAll(std::string* s, const std::string& a, const std::string& b) {
    for (size_t p = s->find(a); p != std::string::npos; p = s->find(a, p + b.size()))
      s->replace(p, a.size(), b);
  }
  std::string text_;
};

// Serves the list in pages made on demand, then one watch: `events` MODIFIED events, then (if
// asked) an ERROR 410 so that the informer re-lists, where every server has a new version.
class ReplayTransport final : public test_util::ScriptedTransport {
 public:
  ReplayTransport(const Shape& shape, size_t servers) : shape_(shape), servers_(servers) {}

  kube::Result<kube::HttpResponse> Do(const kube::HttpRequest& req) override {
    size_t start = 0;
    if (auto c = req.path.find("continue="); c != std::string::npos)
      start = std::strtoull(req.path.c_str() + c + 9, nullptr, 10);
    size_t limit = 500;
    if (auto l = req.path.find("limit="); l != std::string::npos)
      limit = std::strtoull(req.path.c_str() + l + 6, nullptr, 10);
    if (limit == 0) limit = servers_;
    uint64_t version = list_version_.load();
    size_t end = std::min(servers_, start + limit);
    kube::HttpResponse r;
    r.status = 200;
    r.body =
        R"({"apiVersion":"agones.dev/v1","kind":"GameServerList","metadata":{"resourceVersion":")" +
        std::to_string(version) + "\"";
    if (end < servers_) r.body += ",\"continue\":\"" + std::to_string(end) + "\"";
    r.body += "},\"items\":[";
    for (size_t i = start; i < end; ++i) {
      if (i > start) r.body += ',';
      r.body += shape_.Make(i, version + i);
    }
    r.body += "]}";
    return r;
  }

  kube::Result<kube::HttpResponse> Stream(
      const kube::HttpRequest& req, const std::function<bool(std::string_view)>& on_data) override {
    kube::HttpResponse r;
    r.status = 200;
    std::unique_lock<std::mutex> lk(mu_);
    while (!go_ && !shutdown_ && !(req.cancel && req.cancel->cancelled()))
      cv_.wait_for(lk, std::chrono::milliseconds(5));
    if (!go_) return kube::TransportError("cancelled", true);
    go_ = false;
    size_t events = events_;
    bool expire = expire_;
    lk.unlock();
    uint64_t rv = list_version_.load() + servers_;
    std::string chunk;
    for (size_t e = 0; e < events; ++e) {
      chunk += R"({"type":"MODIFIED","object":)" + shape_.Make(e % servers_, ++rv) + "}\n";
      if (chunk.size() > 64 * 1024) {
        if (!on_data(chunk)) return r;
        chunk.clear();
      }
    }
    if (expire) {
      list_version_ = rv + 1000000;
      chunk +=
          R"({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version","reason":"Expired","code":410}})"
          "\n";
    }
    if (!chunk.empty()) on_data(chunk);
    return r;
  }

  // Lets the next watch send `events` events, then expire (or end) it.
  void Release(size_t events, bool expire) {
    std::lock_guard<std::mutex> lk(mu_);
    events_ = events;
    expire_ = expire;
    go_ = true;
    cv_.notify_all();
  }
  void Shutdown() override {
    std::lock_guard<std::mutex> lk(mu_);
    shutdown_ = true;
    cv_.notify_all();
  }
  bool IsShutdown() const override { return shutdown_; }

 private:
  const Shape& shape_;
  size_t servers_;
  std::atomic<uint64_t> list_version_{1000};
  std::mutex mu_;
  std::condition_variable cv_;
  bool go_ = false;
  size_t events_ = 0;
  bool expire_ = false;
  std::atomic<bool> shutdown_{false};
};

class Counter : public kube::InformerHandler {
 public:
  void OnAdd(const kube::ObjectPtr&) override { ++changes; }
  void OnUpdate(const kube::ObjectPtr&, const kube::ObjectPtr&) override { ++changes; }
  void OnDelete(const kube::ObjectPtr&) override { ++changes; }
  void OnSynced() override {
    std::lock_guard<std::mutex> lk(mu);
    ++syncs;
    cv.notify_all();
  }
  bool WaitSyncs(int n) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, std::chrono::minutes(5), [&] { return syncs >= n; });
  }
  std::atomic<uint64_t> changes{0};
  std::mutex mu;
  std::condition_variable cv;
  int syncs = 0;
};

}  // namespace

int main(int argc, char** argv) {
  size_t servers = 20000;
  size_t events = 20000;
  std::string mode = "compact";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--servers") servers = std::strtoull(argv[i + 1], nullptr, 10);
    if (a == "--mode") mode = argv[i + 1];
    if (a == "--events") events = std::strtoull(argv[i + 1], nullptr, 10);
  }
  if (servers == 0 || (mode != "compact" && mode != "document")) {
    std::fprintf(stderr, "usage: %s --servers N [--mode compact|document] [--events E]\n", argv[0]);
    return 2;
  }
  aw::log::SetLevel(aw::log::Level::kWarn);
  Shape shape(std::string(AW_SOURCE_DIR) +
              "/test/fixtures/objects/gameserver-allocating-sdk-ready.json");
  auto owned = std::make_unique<ReplayTransport>(shape, servers);
  ReplayTransport* t = owned.get();
  kube::Client client(std::move(owned));
  kube::InformerOptions o;
  o.name = "bench";
  o.resource = kube::kGameServers;
  o.decode = mode == "compact" ? kube::InformerOptions::Decode::kGameServer
                               : kube::InformerOptions::Decode::kDocument;
  o.backoff_initial = std::chrono::milliseconds(1);
  kube::Informer inf(client, o);
  Counter counter;
  inf.AddHandler(&counter);
  // Warm the executor's thread and the allocator before the baseline.
  std::string warm = shape.Make(0, 1);
  if (warm.empty()) return 1;
  malloc_trim(0);
  double idle = RssMib();

  auto t0 = Clock::now();
  inf.Start();
  if (!counter.WaitSyncs(1)) return 1;
  double list_s = std::chrono::duration<double>(Clock::now() - t0).count();
  malloc_trim(0);
  double synced = RssMib();
  size_t gauge = inf.Bytes();

  // The watch: `events` MODIFIED events, then 410 and a re-list where every server changed.
  uint64_t before = counter.changes.load();
  double list_peak = HwmMib();
  ResetHwm();
  if (HwmMib() > synced + 1)
    std::fprintf(stderr, "warning: VmHWM was not reset (%.1f MiB)\n", HwmMib());
  auto t1 = Clock::now();
  t->Release(events, true);
  while (counter.changes.load() < before + events)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  double events_s = std::chrono::duration<double>(Clock::now() - t1).count();
  auto t2 = Clock::now();
  if (!counter.WaitSyncs(2)) return 1;
  double relist_s = std::chrono::duration<double>(Clock::now() - t2).count();
  double peak = HwmMib();
  malloc_trim(0);
  double after = RssMib();
  inf.Stop();

  std::printf(
      "mode=%s servers=%zu object_bytes=%zu rss_idle_mib=%.1f rss_synced_mib=%.1f "
      "bytes_per_server=%.0f gauge_bytes_per_server=%.0f relist_peak_mib=%.1f "
      "relist_peak_ratio=%.2f list_peak_mib=%.1f rss_after_relist_mib=%.1f list_seconds=%.2f "
      "relist_seconds=%.2f "
      "events_per_second=%.0f\n",
      mode.c_str(), servers, shape.size(), idle, synced, (synced - idle) * 1048576.0 / servers,
      static_cast<double>(gauge) / servers, peak, peak / synced, list_peak, after, list_s, relist_s,
      events / events_s);
  return 0;
}
