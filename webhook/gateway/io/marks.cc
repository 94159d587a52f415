#include "gateway/io/marks.h"

#include <chrono>

#include "contract/keys.h"
#include "gateway/delivery.h"
#include "policy/gameserver.h"
#include "util/io/log.h"
#include "util/time_format.h"

namespace aw::gateway {
namespace {

std::string NowText() {
  return util::FormatRfc3339Nano(
      std::chrono::time_point_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now()));
}

}  // namespace

kube::ObjectPtr FindByRequestKey(const std::vector<kube::ObjectPtr>& servers, const std::string& ns,
                                 const std::string& key) {
  kube::ObjectPtr best;
  std::string best_at;
  for (const kube::ObjectPtr& obj : servers) {
    if (!obj || !obj->doc || obj->namespace_ != ns) continue;
    const rapidjson::Value& doc = *obj->doc;
    auto meta = doc.FindMember("metadata");
    if (meta == doc.MemberEnd() || !meta->value.IsObject()) continue;
    auto ann = meta->value.FindMember("annotations");
    if (ann == meta->value.MemberEnd() || !ann->value.IsObject()) continue;
    auto k = ann->value.FindMember(
        rapidjson::StringRef(keys::kRequestKey.data(), keys::kRequestKey.size()));
    if (k == ann->value.MemberEnd() || !k->value.IsString() ||
        std::string_view(k->value.GetString(), k->value.GetStringLength()) != key) {
      continue;
    }
    const policy::GameServerView gs = policy::ParseGameServer(doc);
    if (!HoldsRequest(gs)) continue;
    std::string at(gs.Annotation(keys::kLastAllocated).value_or(""));
    if (!best || at < best_at) {  // RFC 3339 UTC times of one writer compare as text
      best = obj;
      best_at = std::move(at);
    }
  }
  return best;
}

GameServerMarks::GameServerMarks(kube::Client& client, size_t workers)
    : client_(client), pool_(workers) {}

GameServerMarks::~GameServerMarks() = default;

void GameServerMarks::MarkDelivered(const std::string& ns, const std::string& name,
                                    const std::string& at, std::function<void(Status)> done) {
  pool_.Post([this, ns, name, at, done = std::move(done)] {
    auto r =
        client_.Patch(kube::kGameServers, ns, name, kube::PatchType::kJson, DeliveredPatch(at));
    log::debug("gateway: delivery mark written",
               {{"gameserver", ns + "/" + name},
                {"result", r.ok() ? std::string("ok") : r.status().ToString()}});
    done(r.ok() ? Status::Ok() : r.status());
  });
}

void GameServerMarks::ReleaseNow(const std::string& ns, const std::string& name,
                                 const std::string& expected) {
  Write("release", ns, name, AnswerByPatch(NowText(), expected));
}

void GameServerMarks::Undeliver(const std::string& ns, const std::string& name,
                                const std::string& at) {
  Write("undeliver", ns, name, UndeliveredPatch(at, NowText()));
}

void GameServerMarks::ExtendAnswerBy(const std::string& ns, const std::string& name,
                                     const std::string& answer_by) {
  Write("extend", ns, name, AnswerByPatch(answer_by));
}

void GameServerMarks::Write(const std::string& what, const std::string& ns, const std::string& name,
                            std::string patch) {
  pool_.Post([this, what, ns, name, patch = std::move(patch)] {
    Status last;
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto r = client_.Patch(kube::kGameServers, ns, name, kube::PatchType::kJson, patch);
      if (r.ok()) {
        log::debug("gateway: delivery annotations written",
                   {{"gameserver", ns + "/" + name}, {"write", what}});
        return;
      }
      last = r.status();
      if (r.error().IsInvalid() || r.error().IsNotFound()) {
        // Its `test` failed (a later call owns the marks now) or the server is gone: nothing
        // left to do.
        log::debug("gateway: delivery annotations superseded",
                   {{"gameserver", ns + "/" + name}, {"write", what}, {"error", last.ToString()}});
        return;
      }
      if (!r.error().IsRetryable()) break;
    }
    log::warn(
        "gateway: could not write the GameServer's delivery annotations; the resolver "
        "releases it at its earlier answer-by",
        {{"gameserver", ns + "/" + name}, {"write", what}, {"error", last.ToString()}});
  });
}

}  // namespace aw::gateway
