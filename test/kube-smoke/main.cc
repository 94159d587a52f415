// kube-smoke: drives webhook/kube against a real API server for the end-to-end tests
// (test/e2e/kube). One scenario per run; results as lines on stdout; exit 0 only on success.
//
//   kube-smoke --kubeconfig F [--context C] verbs NS
//   kube-smoke ... paginate NS LIMIT       lists configmaps labelled page=yes, prints items/pages
//   kube-smoke ... watch-expired NS        a watch from resourceVersion 1 must end with 410
//   kube-smoke ... informer NS [WATCH_TIMEOUT_S [PAGE_SIZE]]
//                                          GameServer cache events as JSON lines until stdin closes
//   kube-smoke ... get-loop CRD            GET the named CRD every 100ms: "ok" / "err CODE" lines
//   kube-smoke ... events NS GAMESERVER    records 3 identical + 1 different Event, then waits
#include <fmt/format.h>
#include <poll.h>
#include <rapidjson/document.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "kube/config.h"
#include "kube/events.h"
#include "kube/gameserver_cache.h"
#include "util/io/log.h"

using namespace aw;
using namespace aw::kube;

namespace {

std::mutex g_out_mu;
void Out(const std::string& line) {
  std::lock_guard<std::mutex> lk(g_out_mu);
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

[[noreturn]] void Fail(const std::string& what) {
  Out("FAIL " + what);
  std::exit(1);
}

// The client's asynchronous verbs, awaited: each scenario runs on this tool's main thread, which
// may wait (the callbacks run on the client's I/O thread).
template <typename T, typename Start>
Result<T> Await(Start start) {
  std::promise<Result<T>> p;
  auto f = p.get_future();
  start([&p](Result<T> r) { p.set_value(std::move(r)); });
  return f.get();
}
Result<JsonPtr> Get(Client& c, const Resource& r, std::string_view ns, std::string_view name,
                    Client::Timeout timeout = std::nullopt) {
  return Await<JsonPtr>([&](auto done) { c.GetAsync(r, ns, name, done, timeout); });
}
Result<JsonPtr> Create(Client& c, const Resource& r, std::string_view ns, const std::string& body) {
  return Await<JsonPtr>([&](auto done) { c.CreateAsync(r, ns, body, done); });
}
Result<JsonPtr> Update(Client& c, const Resource& r, std::string_view ns, std::string_view name,
                       const std::string& body) {
  return Await<JsonPtr>([&](auto done) { c.UpdateAsync(r, ns, name, body, done); });
}
Result<JsonPtr> Patch(Client& c, const Resource& r, std::string_view ns, std::string_view name,
                      PatchType type, const std::string& body) {
  return Await<JsonPtr>([&](auto done) { c.PatchAsync(r, ns, name, type, body, done); });
}
Result<JsonPtr> Delete(Client& c, const Resource& r, std::string_view ns, std::string_view name) {
  return Await<JsonPtr>([&](auto done) { c.DeleteAsync(r, ns, name, done); });
}
Result<ListResult> ListAll(Client& c, const Resource& r, std::string_view ns, ListOptions o) {
  return Await<ListResult>([&](auto done) { c.ListAllAsync(r, ns, std::move(o), done); });
}
Result<std::string> Watch(Client& c, const Resource& r, std::string_view ns, const WatchOptions& o,
                          std::function<bool(WatchEvent&)> handler) {
  return Await<std::string>([&](auto done) { c.WatchAsync(r, ns, o, std::move(handler), done); });
}

template <typename T>
T Must(Result<T> r, const std::string& step) {
  if (!r) Fail(step + ": " + r.error().ToString());
  Out("ok " + step);
  return std::move(r.value());
}

template <typename T>
void MustFail(const Result<T>& r, const std::string& step, bool (ApiError::*pred)() const) {
  if (r) Fail(step + ": expected an error, got success");
  if (!(r.error().*pred)()) Fail(step + ": unexpected error " + r.error().ToString());
  Out("ok " + step + " (" + r.error().ToString() + ")");
}

std::string Str(const rapidjson::Value& v, std::initializer_list<const char*> path) {
  const rapidjson::Value* cur = &v;
  for (const char* p : path) {
    if (!cur->IsObject()) return {};
    auto it = cur->FindMember(p);
    if (it == cur->MemberEnd()) return {};
    cur = &it->value;
  }
  return cur->IsString() ? cur->GetString() : std::string();
}

int Verbs(Client& c, const std::string& ns) {
  std::string cm = fmt::format(
      R"({{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"smoke-a","namespace":"{}","labels":{{"smoke":"yes"}}}},"data":{{"k":"v1"}}}})",
      ns);
  auto created = Must(Create(c, kConfigMaps, ns, cm), "create");
  MustFail(Create(c, kConfigMaps, ns, cm), "create-duplicate", &ApiError::IsAlreadyExists);
  auto got = Must(Get(c, kConfigMaps, ns, "smoke-a"), "get");
  if (Str(*got, {"data", "k"}) != "v1") Fail("get: wrong data");
  ListOptions lo;
  lo.label_selector = "smoke=yes";
  auto list = Must(ListAll(c, kConfigMaps, ns, lo), "list");
  if (list.items.size() != 1 || list.resource_version.empty())
    Fail("list: want 1 item and a resourceVersion");
  lo.label_selector = "smoke=no";
  if (!Must(ListAll(c, kConfigMaps, ns, lo), "list-selector").items.empty())
    Fail("list-selector: want 0 items");
  // update with the current resourceVersion, then a stale one (409 Conflict)
  std::string rv1 = MetaString(*got, "resourceVersion");
  (*got)["data"]["k"].SetString("v2", got->GetAllocator());
  auto updated = Must(Update(c, kConfigMaps, ns, "smoke-a", ToJson(*got)), "update");
  MustFail(Update(c, kConfigMaps, ns, "smoke-a", ToJson(*got)), "update-stale",
           &ApiError::IsConflict);
  std::string rv2 = MetaString(*updated, "resourceVersion");
  // JSON patch guarded by a resourceVersion test; a failing test is refused
  std::string jp = fmt::format(
      R"([{{"op":"test","path":"/metadata/resourceVersion","value":"{}"}},{{"op":"add","path":"/data/j","value":"json"}}])",
      rv2);
  auto patched = Must(Patch(c, kConfigMaps, ns, "smoke-a", PatchType::kJson, jp), "patch-json");
  if (Str(*patched, {"data", "j"}) != "json") Fail("patch-json: not applied");
  auto stale = Patch(c, kConfigMaps, ns, "smoke-a", PatchType::kJson, jp);
  if (stale) Fail("patch-json-stale: expected an error");
  if (!(stale.error().IsInvalid() || stale.error().IsConflict()))
    Fail("patch-json-stale: " + stale.error().ToString());
  Out("ok patch-json-stale (" + stale.error().ToString() + ")");
  auto merged = Must(
      Patch(c, kConfigMaps, ns, "smoke-a", PatchType::kMerge, R"({"data":{"m":"merge","k":null}})"),
      "patch-merge");
  if (Str(*merged, {"data", "m"}) != "merge" || !Str(*merged, {"data", "k"}).empty())
    Fail("patch-merge: not applied");
  // GameServer (agones.dev/v1) create + JSON patch; CRD get; lease create/get/delete
  std::string gs = fmt::format(
      R"({{"apiVersion":"agones.dev/v1","kind":"GameServer","metadata":{{"name":"smoke-gs","namespace":"{}"}},"spec":{{"ports":[{{"name":"default","containerPort":7654}}],"template":{{"spec":{{"containers":[{{"name":"gs","image":"x"}}]}}}}}}}})",
      ns);
  Must(Create(c, kGameServers, ns, gs), "create-gameserver");
  Must(Patch(c, kGameServers, ns, "smoke-gs", PatchType::kMerge,
             R"({"metadata":{"annotations":{"smoke":"1"}}})"),
       "patch-gameserver");
  Must(Get(c, kCustomResourceDefinitions, "", "gameservers.agones.dev"), "get-crd");
  std::string lease = fmt::format(
      R"({{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{{"name":"smoke","namespace":"{}"}},"spec":{{"holderIdentity":"x"}}}})",
      ns);
  Must(Create(c, kLeases, ns, lease), "create-lease");
  Must(Delete(c, kLeases, ns, "smoke"), "delete-lease");
  Must(Delete(c, kGameServers, ns, "smoke-gs"), "delete-gameserver");
  Must(Delete(c, kConfigMaps, ns, "smoke-a"), "delete");
  MustFail(Get(c, kConfigMaps, ns, "smoke-a"), "get-deleted", &ApiError::IsNotFound);
  MustFail(Delete(c, kConfigMaps, ns, "smoke-a"), "delete-missing", &ApiError::IsNotFound);
  (void)created;
  (void)rv1;
  Out("PASS verbs");
  return 0;
}

int Paginate(Client& c, const std::string& ns, int limit) {
  ListOptions lo;
  lo.label_selector = "page=yes";
  lo.limit = limit;
  auto r = ListAll(c, kConfigMaps, ns, lo);
  if (!r) Fail("paginate: " + r.error().ToString());
  std::vector<std::string> names;
  for (auto& it : r->items) names.push_back(MetaString(*it, "name"));
  Out(fmt::format(R"({{"items":{},"pages":{},"resourceVersion":"{}"}})", names.size(), r->pages,
                  r->resource_version));
  return 0;
}

int WatchExpired(Client& c, const std::string& ns) {
  WatchOptions wo;
  wo.resource_version = "1";
  wo.timeout_seconds = 10;
  int events = 0;
  auto r = Watch(c, kConfigMaps, ns, wo, [&](WatchEvent&) {
    ++events;
    return true;
  });
  if (r)
    Fail(
        fmt::format("watch from resourceVersion 1 ended without an error after {} events", events));
  if (!r.error().IsExpired()) Fail("watch: not an Expired error: " + r.error().ToString());
  Out(fmt::format("expired {} {} {}", r.error().http_status, r.error().reason, r.error().message));
  return 0;
}

bool StdinClosed(int timeout_ms) {
  pollfd p{0, POLLIN, 0};
  int n = poll(&p, 1, timeout_ms);
  if (n <= 0) return false;
  char buf[256];
  return read(0, buf, sizeof(buf)) <= 0;
}

class PrintHandler : public InformerHandler {
 public:
  // "op" tells an add (an object the cache did not hold) from an update, so a test can check that
  // no object is added twice.
  void OnAdd(const ObjectPtr& o) override { Upsert("add", o); }
  void OnUpdate(const ObjectPtr&, const ObjectPtr& o) override { Upsert("update", o); }
  void Upsert(const char* op, const ObjectPtr& o) {
    Out(fmt::format(R"({{"ev":"upsert","op":"{}","name":"{}","rv":"{}","state":"{}"}})", op,
                    o->name, o->resource_version, o->state));
  }
  void OnDelete(const ObjectPtr& o) override {
    Out(fmt::format(R"({{"ev":"delete","name":"{}","rv":"{}"}})", o->name, o->resource_version));
  }
  void OnSynced() override { Out(R"({"ev":"synced"})"); }
};

// watch_timeout_s / page_size: 0 keeps GameServerCacheOptions' default. A short watch timeout makes
// the server end the watch regularly, so a test sees whether the informer resumes (no `synced`
// line: no re-list) from the last event or bookmark.
int RunInformer(Client& c, const std::string& ns, int watch_timeout_s, int page_size) {
  InformerOptions opts = GameServerCacheOptions(ns);
  if (watch_timeout_s > 0) opts.watch_timeout_seconds = watch_timeout_s;
  if (page_size > 0) opts.page_size = page_size;
  Informer cache(c, std::move(opts), nullptr);
  PrintHandler h;
  cache.AddHandler(&h);
  cache.Start();
  while (!StdinClosed(200)) {
  }
  auto t0 = std::chrono::steady_clock::now();
  cache.Stop();
  Out(fmt::format(
      R"({{"ev":"stopped","ms":{}}})",
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count()));
  return 0;
}

int GetLoop(Client& c, const std::string& ns) {
  while (!StdinClosed(100)) {
    auto r = Get(c, kCustomResourceDefinitions, "", ns, std::chrono::milliseconds(2000));
    Out(r ? "ok" : fmt::format("err {}", r.error().http_status));
  }
  return 0;
}

int Events(Client& c, const std::string& ns, const std::string& gs_name) {
  auto gs = Get(c, kGameServers, ns, gs_name);
  if (!gs) Fail("get gameserver: " + gs.error().ToString());
  EventRecorderOptions eo;
  eo.host = "kube-smoke";
  EventRecorder rec(c, eo, nullptr);
  rec.Start();
  auto ref = RefFor(**gs);
  for (int i = 0; i < 3; ++i) rec.Record(ref, EventType::kNormal, "SmokeRepeated", "same message");
  rec.Record(ref, EventType::kWarning, "SmokeOther", "another message");
  std::this_thread::sleep_for(std::chrono::seconds(2));
  rec.Stop();
  Out("PASS events");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  log::SetFormat(log::Format::kText);
  std::string kubeconfig, context;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--kubeconfig" && i + 1 < argc) {
      kubeconfig = argv[++i];
    } else if (a == "--context" && i + 1 < argc) {
      context = argv[++i];
    } else {
      args.push_back(a);
    }
  }
  if (kubeconfig.empty() || args.size() < 2) {
    std::fprintf(stderr, "usage: kube-smoke --kubeconfig F [--context C] SCENARIO NS [ARGS]\n");
    return 2;
  }
  auto cfg = LoadKubeconfig(kubeconfig, context, false);
  if (!cfg) Fail(cfg.status().message());
  StatusOr<std::unique_ptr<Client>> made = NewClient(*cfg);
  if (!made) Fail(made.status().message());
  std::unique_ptr<Client> client = std::move(made).value();
  const std::string& scenario = args[0];
  const std::string& ns = args[1];
  if (scenario == "verbs") return Verbs(*client, ns);
  if (scenario == "paginate" && args.size() == 3) return Paginate(*client, ns, std::stoi(args[2]));
  if (scenario == "watch-expired") return WatchExpired(*client, ns);
  if (scenario == "informer")
    return RunInformer(*client, ns, args.size() > 2 ? std::stoi(args[2]) : 0,
                       args.size() > 3 ? std::stoi(args[3]) : 0);
  if (scenario == "get-loop") return GetLoop(*client, ns);
  if (scenario == "events" && args.size() == 3) return Events(*client, ns, args[2]);
  std::fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
  return 2;
}
