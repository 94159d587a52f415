// Test helpers for the resolver: GameServer JSON builders and fake ports.
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "contract/keys.h"
#include "probe/prober.h"
#include "resolver/core/gameserver.h"
#include "resolver/core/ports.h"
#include "util/time_format.h"

namespace aw::resolver::testing {

inline TimePoint T0() {
  return std::chrono::time_point_cast<Clock::duration>(
      *util::ParseRfc3339("2026-01-02T03:04:05.000000001Z"));
}

// A minimal opted-in GameServer in `state` with the given annotations.
struct GsSpec {
  std::string ns = "default";
  std::string name = "gs-1";
  std::string rv = "100";
  std::string state = "Allocating";
  bool opted_in = true;
  std::map<std::string, std::string> annotations;
  std::string address = "127.0.0.1";
  std::vector<std::pair<std::string, int>> ports = {{"game", 7777}, {"http", 8080}};
  bool deleting = false;
  std::string labels_fleet;  // label agones.dev/fleet when non-empty
};

inline std::string GsJson(const GsSpec& s) {
  rapidjson::Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  rapidjson::Value meta(rapidjson::kObjectType);
  meta.AddMember("namespace", rapidjson::Value(s.ns, a), a);
  meta.AddMember("name", rapidjson::Value(s.name, a), a);
  meta.AddMember("uid", "uid-1", a);
  meta.AddMember("resourceVersion", rapidjson::Value(s.rv, a), a);
  if (s.deleting) meta.AddMember("deletionTimestamp", "2026-01-01T00:00:00Z", a);
  rapidjson::Value labels(rapidjson::kObjectType);
  if (s.opted_in) {
    rapidjson::Value k(std::string(keys::kEnabledLabel), a);
    labels.AddMember(k, rapidjson::Value("true", a), a);
  }
  if (!s.labels_fleet.empty()) {
    labels.AddMember("agones.dev/fleet", rapidjson::Value(s.labels_fleet, a), a);
  }
  meta.AddMember("labels", labels, a);
  rapidjson::Value ann(rapidjson::kObjectType);
  for (const auto& [k, v] : s.annotations) {
    ann.AddMember(rapidjson::Value(k, a), rapidjson::Value(v, a), a);
  }
  meta.AddMember("annotations", ann, a);
  d.AddMember("metadata", meta, a);
  rapidjson::Value status(rapidjson::kObjectType);
  status.AddMember("state", rapidjson::Value(s.state, a), a);
  status.AddMember("address", rapidjson::Value(s.address, a), a);
  rapidjson::Value ports(rapidjson::kArrayType);
  for (const auto& [n, p] : s.ports) {
    rapidjson::Value port(rapidjson::kObjectType);
    port.AddMember("name", rapidjson::Value(n, a), a);
    port.AddMember("port", p, a);
    ports.PushBack(port, a);
  }
  status.AddMember("ports", ports, a);
  d.AddMember("status", status, a);
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  d.Accept(w);
  return buf.GetString();
}

inline GameServerView View(const GsSpec& s) {
  rapidjson::Document d;
  d.Parse(GsJson(s));
  return ParseGameServer(d);
}

// "Allocating since t with allocation id t" (no last-allocated), the webhook's rewrite.
inline std::map<std::string, std::string> AllocatingAnnotations(TimePoint since,
                                                                const std::string& id = "") {
  std::string s = util::FormatRfc3339Nano(since);
  return {{std::string(keys::kSince), s}, {std::string(keys::kAllocation), id.empty() ? s : id}};
}

class FakeClock final : public WallClock {
 public:
  TimePoint Now() const override { return now; }
  TimePoint now = T0();
};

class FakeSource final : public GameServerSource {
 public:
  std::shared_ptr<const GameServerView> Get(const std::string& ns,
                                            const std::string& name) override {
    std::lock_guard<std::mutex> lock(mu);
    auto it = objects.find(ns + "/" + name);
    return it == objects.end() ? nullptr : it->second;
  }
  std::vector<std::shared_ptr<const GameServerView>> List() override {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::shared_ptr<const GameServerView>> out;
    for (const auto& [k, v] : objects) out.push_back(v);
    return out;
  }
  void Put(const GameServerView& v) {
    std::lock_guard<std::mutex> lock(mu);
    objects[v.Key()] = std::make_shared<const GameServerView>(v);
  }
  void Remove(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu);
    objects.erase(key);
  }
  std::shared_ptr<const GameServerView> At(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = objects.find(key);
    return it == objects.end() ? nullptr : it->second;
  }
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const GameServerView>> objects;
};

// Applies patches to a FakeSource the way the API server would (test ops first; add/replace of
// /status/state and /metadata/annotations/<key>), bumping the resourceVersion.
class FakePatcher final : public Patcher {
 public:
  explicit FakePatcher(FakeSource& source) : source_(source) {}
  // Applied at once: `done` runs on the calling thread.
  void PatchGameServerAsync(const std::string& ns, const std::string& name,
                            const std::string& json_patch,
                            std::function<void(Status)> done) override {
    done(Apply(ns, name, json_patch));
  }
  Status Apply(const std::string& ns, const std::string& name, const std::string& json_patch) {
    std::lock_guard<std::mutex> lock(mu);
    patches.push_back(json_patch);
    if (!scripted.empty()) {
      Status o = scripted.front();
      scripted.pop_front();
      if (!o.ok()) return o;
    }
    auto cur = source_.At(ns + "/" + name);
    if (!cur) return Status::NotFound("not found");
    GameServerView next = *cur;
    rapidjson::Document d;
    d.Parse(json_patch);
    if (d.HasParseError() || !d.IsArray()) return Status::InvalidArgument("bad patch");
    for (const auto& op : d.GetArray()) {
      std::string kind = op["op"].GetString();
      std::string path = op["path"].GetString();
      std::string value = op["value"].IsString() ? op["value"].GetString() : "";
      std::string key = Unescape(
          path.substr(std::min(path.size(), std::string("/metadata/annotations/").size())));
      if (kind == "test") {
        std::string have = path == "/metadata/resourceVersion"
                               ? next.resource_version
                               : std::string(next.Annotation(key).value_or("<absent>"));
        if (have != value) return Status::Conflict("test failed: " + path);
      } else if (kind == "remove" && path.rfind("/metadata/annotations/", 0) == 0) {
        if (!next.Annotation(key)) return Status::InvalidArgument("remove of an absent key");
        policy::StringMap::Map m = next.annotations.entries();
        m.erase(key);
        next.annotations = policy::StringMap(std::move(m));
      } else if (path == "/status/state") {
        next.state = value;
      } else if (path.rfind("/metadata/annotations/", 0) == 0) {
        next.annotations.Set(key, value);
      } else {
        return Status::InvalidArgument("unexpected path " + path);
      }
    }
    // The fields the view derives from annotations follow them, as a re-parse would.
    next.allocation = std::string(next.Annotation(keys::kAllocation).value_or(""));
    next.since.reset();
    if (auto since = next.Annotation(keys::kSince)) {
      if (auto t = util::ParseRfc3339(*since)) {
        next.since = std::chrono::time_point_cast<Clock::duration>(*t);
      }
    }
    next.resource_version = std::to_string(std::stoll(next.resource_version) + 1);
    if (auto_apply) source_.Put(next);
    applied.push_back(next);
    return Status::Ok();
  }
  static std::string Unescape(std::string s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '~' && i + 1 < s.size()) {
        out += s[i + 1] == '1' ? '/' : '~';
        ++i;
      } else {
        out += s[i];
      }
    }
    return out;
  }
  std::mutex mu;
  std::vector<std::string> patches;
  std::vector<GameServerView> applied;
  std::deque<Status> scripted;
  bool auto_apply = true;

 private:
  FakeSource& source_;
};

class FakeEvents final : public EventRecorder {
 public:
  struct Ev {
    std::string key;
    EventType type;
    std::string reason;
    std::string message;
  };
  void Record(const GameServerView& gs, EventType type, const std::string& reason,
              const std::string& message) override {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back({gs.Key(), type, reason, message});
  }
  std::mutex mu;
  std::vector<Ev> events;
};

class FakeProber final : public probe::Prober {
 public:
  void Probe(const probe::Target& target, probe::Callback done) override {
    pending.push_back({target, std::move(done)});
  }
  // Completes every pending probe with `result`; returns how many.
  size_t CompleteAll(probe::Result result) {
    auto batch = std::move(pending);
    pending.clear();
    for (auto& [t, cb] : batch) cb(result);
    return batch.size();
  }
  std::vector<std::pair<probe::Target, probe::Callback>> pending;
};

class ManualExecutor final : public Executor {
 public:
  void Post(std::function<void()> task) override { tasks.push_back(std::move(task)); }
  size_t RunAll() {
    size_t n = 0;
    while (!tasks.empty()) {
      auto t = std::move(tasks.front());
      tasks.pop_front();
      t();
      ++n;
    }
    return n;
  }
  std::deque<std::function<void()>> tasks;
};

}  // namespace aw::resolver::testing
