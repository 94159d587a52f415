#include "gateway/io/marks.h"

#include <algorithm>
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

void RegisterDeliveryFlags(flags::FlagSet& fs, size_t* workers) {
  fs.Size("delivery-workers", workers,
          "threads writing the delivery marks (allocating.agones.dev/delivered, answer-by) on the "
          "GameServers the gateway allocated: one Kubernetes API write before each answer",
          1, 256);
}

GameServerMarks::GameServerMarks(kube::Client& client, size_t workers)
    : client_(client), pool_(workers) {}

GameServerMarks::~GameServerMarks() = default;

// One compare-and-swap edit of `delivered`: read the object, build the patch from what it holds,
// write it tested on that resourceVersion; a conflicting write in between (another delivery,
// the resolver) makes it read again. `build` returns "" when there is nothing to write.
Status GameServerMarks::Swap(const std::string& ns, const std::string& name,
                             const std::function<std::string(const policy::GameServerView&)>& build,
                             const policy::GameServerView* first) {
  Status last = Status::Unavailable("no attempt made");
  for (int attempt = 0; attempt < 5; ++attempt) {
    policy::GameServerView gs;
    if (attempt == 0 && first != nullptr) {
      gs = *first;  // the caller's view: usually current, saving the read
    } else {
      auto got = client_.Get(kube::kGameServers, ns, name);
      if (!got.ok()) {
        last = got.status();
        if (!got.error().IsRetryable()) return last;
        continue;
      }
      gs = policy::ParseGameServer(**got);
    }
    const std::string patch = build(gs);
    if (patch.empty()) return Status::Ok();
    auto r = client_.Patch(kube::kGameServers, ns, name, kube::PatchType::kJson, patch);
    if (r.ok()) return Status::Ok();
    last = r.status();
    if (r.error().IsConflict() || r.error().IsInvalid()) {
      // The object changed since it was read (or, for a mark, the server left Allocated: the
      // next read says so).
      continue;
    }
    if (!r.error().IsRetryable()) return last;
  }
  return last;
}

void GameServerMarks::MarkDelivered(const DeliveryMark& mark, std::function<void(Status)> done) {
  pool_.Post([this, mark, done = std::move(done)] {
    const std::string& ns = mark.ns;
    const std::string& name = mark.name;
    const std::string& at = mark.at;
    bool not_allocated = false;
    Status s = Swap(
        ns, name,
        [&](const policy::GameServerView& gs) -> std::string {
          if (gs.state != keys::kStateAllocated) {
            not_allocated = true;
            return "";
          }
          return DeliveredPatch(gs.resource_version, gs.Annotation(keys::kDelivered).value_or(""),
                                at);
        },
        mark.seen ? &*mark.seen : nullptr);
    if (s.ok() && not_allocated) s = Status::Conflict("the GameServer is no longer Allocated");
    log::debug("gateway: delivery mark written",
               {{"gameserver", ns + "/" + name}, {"delivery", at}, {"result", s.ToString()}});
    done(s);
  });
}

void GameServerMarks::ReleaseNow(const std::string& ns, const std::string& name,
                                 const std::string& expected) {
  Write("release", ns, name, AnswerByPatch(NowText(), expected));
}

void GameServerMarks::Undeliver(const std::string& ns, const std::string& name,
                                const std::string& at) {
  pool_.Post([this, ns, name, at] {
    Status s = Swap(ns, name, [&](const policy::GameServerView& gs) -> std::string {
      const std::string current(gs.Annotation(keys::kDelivered).value_or(""));
      const std::vector<std::string> list = DeliveriesOf(current);
      if (std::find(list.begin(), list.end(), at) == list.end()) return "";  // not there
      return UndeliveredPatch(gs.resource_version, current, at, NowText());
    });
    if (!s.ok() && s.code() != Status::Code::kNotFound) {
      log::warn(
          "gateway: could not take back the delivery mark of an answer that was not "
          "written; the server stays marked delivered",
          {{"gameserver", ns + "/" + name}, {"delivery", at}, {"error", s.ToString()}});
    } else {
      log::debug("gateway: delivery taken back",
                 {{"gameserver", ns + "/" + name}, {"delivery", at}});
    }
  });
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
