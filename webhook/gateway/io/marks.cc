#include "gateway/io/marks.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <utility>

#include "contract/keys.h"
#include "gateway/delivery.h"
#include "policy/gameserver.h"
#include "runtime/io_thread.h"
#include "util/io/log.h"
#include "util/time_format.h"

namespace aw::gateway {
namespace {

std::string NowText() {
  return util::FormatRfc3339Nano(
      std::chrono::time_point_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now()));
}

using Build = std::function<std::string(const policy::GameServerView&)>;

// One compare-and-swap edit of the delivery annotations, as a chain of asynchronous calls: read
// the object (or use the caller's view for the first attempt), build the patch from what it
// holds, write it tested on that resourceVersion; a conflicting write in between (another
// delivery, the resolver) makes it read again. Up to 5 attempts; `build` returning "" means
// there is nothing to write (OK). `done` runs once, on the Kubernetes client's I/O thread.
class SwapOp : public std::enable_shared_from_this<SwapOp> {
 public:
  SwapOp(kube::Client& client, std::string ns, std::string name, Build build,
         std::optional<policy::GameServerView> first, std::function<void(Status)> done)
      : client_(client),
        ns_(std::move(ns)),
        name_(std::move(name)),
        build_(std::move(build)),
        first_(std::move(first)),
        done_(std::move(done)) {}

  void Next() {
    if (attempt_ >= 5) return done_(last_);
    if (attempt_++ == 0 && first_) return Write(*first_);  // usually current: saves the read
    client_.GetAsync(kube::kGameServers, ns_, name_,
                     [self = shared_from_this()](kube::Result<kube::JsonPtr> got) {
                       if (!got.ok()) {
                         self->last_ = got.status();
                         if (!got.error().IsRetryable()) return self->done_(self->last_);
                         return self->Next();
                       }
                       self->Write(policy::ParseGameServer(**got));
                     });
  }

 private:
  void Write(const policy::GameServerView& gs) {
    const std::string patch = build_(gs);
    if (patch.empty()) return done_(Status::Ok());
    client_.PatchAsync(kube::kGameServers, ns_, name_, kube::PatchType::kJson, patch,
                       [self = shared_from_this()](kube::Result<kube::JsonPtr> r) {
                         if (r.ok()) return self->done_(Status::Ok());
                         self->last_ = r.status();
                         // The object changed since it was read (or, for a mark, the server
                         // left Allocated: the next read says so).
                         if (r.error().IsConflict() || r.error().IsInvalid()) return self->Next();
                         if (!r.error().IsRetryable()) return self->done_(self->last_);
                         self->Next();
                       });
  }

  kube::Client& client_;
  const std::string ns_, name_;
  const Build build_;
  const std::optional<policy::GameServerView> first_;
  const std::function<void(Status)> done_;
  int attempt_ = 0;
  Status last_ = Status::Unavailable("no attempt made");
};

// A fire-and-forget JSON patch tried up to 3 times on a retryable error; `done` gets the last
// error, or OK (also when the patch's `test` failed or the server is gone: superseded).
class PatchOp : public std::enable_shared_from_this<PatchOp> {
 public:
  PatchOp(kube::Client& client, std::string what, std::string ns, std::string name,
          std::string patch, std::function<void()> release)
      : client_(client),
        what_(std::move(what)),
        ns_(std::move(ns)),
        name_(std::move(name)),
        patch_(std::move(patch)),
        release_(std::move(release)) {}

  void Next() {
    ++attempt_;
    client_.PatchAsync(
        kube::kGameServers, ns_, name_, kube::PatchType::kJson, patch_,
        [self = shared_from_this()](kube::Result<kube::JsonPtr> r) { self->OnAnswer(r); });
  }

 private:
  void OnAnswer(const kube::Result<kube::JsonPtr>& r) {
    const std::string gameserver = ns_ + "/" + name_;
    if (r.ok()) {
      log::debug("gateway: delivery annotations written",
                 {{"gameserver", gameserver}, {"write", what_}});
      return release_();
    }
    const Status last = r.status();
    if (r.error().IsInvalid() || r.error().IsNotFound()) {
      // Its `test` failed (a later call owns the marks now) or the server is gone: nothing left
      // to do.
      log::debug("gateway: delivery annotations superseded",
                 {{"gameserver", gameserver}, {"write", what_}, {"error", last.ToString()}});
      return release_();
    }
    if (r.error().IsRetryable() && attempt_ < 3) return Next();
    log::warn(
        "gateway: could not write the GameServer's delivery annotations; the resolver "
        "releases it at its earlier answer-by",
        {{"gameserver", gameserver}, {"write", what_}, {"error", last.ToString()}});
    release_();
  }

  kube::Client& client_;
  const std::string what_, ns_, name_, patch_;
  const std::function<void()> release_;
  int attempt_ = 0;
};

}  // namespace

void RegisterDeliveryFlags(flags::FlagSet& fs, size_t* workers) {
  fs.Size("delivery-workers", workers,
          "delivery-mark writes (allocating.agones.dev/delivered, answer-by) in flight at most, "
          "on the GameServers the gateway allocated: one Kubernetes API write before each "
          "answer (asynchronous calls: no thread each; more wait their turn)",
          1, 256);
}

GameServerMarks::GameServerMarks(kube::Client& client, size_t workers)
    : client_(client), limit_(workers) {}

GameServerMarks::~GameServerMarks() {
  // limit_'s destructor waits for the writes in flight, whose callbacks run on the client's I/O
  // thread: there it would never return.
  runtime::DieIfOn(client_.executor(), "~GameServerMarks");
}

void GameServerMarks::Swap(const std::string& ns, const std::string& name, Build build,
                           std::optional<policy::GameServerView> first,
                           std::function<void(Status)> done) {
  limit_.Submit([this, ns, name, build = std::move(build), first = std::move(first),
                 done = std::move(done)](runtime::InFlightLimit::Release release) mutable {
    auto op = std::make_shared<SwapOp>(
        client_, ns, name, std::move(build), std::move(first),
        [done = std::move(done), release = std::move(release)](Status s) {
          done(std::move(s));
          release();  // last: the destructor may return once every slot is free
        });
    op->Next();
  });
}

void GameServerMarks::MarkDelivered(const DeliveryMark& mark, std::function<void(Status)> done) {
  auto not_allocated = std::make_shared<bool>(false);
  Swap(
      mark.ns, mark.name,
      [not_allocated, at = mark.at](const policy::GameServerView& gs) -> std::string {
        if (gs.state != keys::kStateAllocated) {
          *not_allocated = true;
          return "";
        }
        return DeliveredPatch(gs.resource_version, gs.Annotation(keys::kDelivered).value_or(""),
                              at);
      },
      mark.seen,
      [not_allocated, ns = mark.ns, name = mark.name, at = mark.at,
       done = std::move(done)](Status s) {
        if (s.ok() && *not_allocated) s = Status::Conflict("the GameServer is no longer Allocated");
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
  Swap(
      ns, name,
      [at](const policy::GameServerView& gs) -> std::string {
        const std::string current(gs.Annotation(keys::kDelivered).value_or(""));
        const std::vector<std::string> list = DeliveriesOf(current);
        if (std::find(list.begin(), list.end(), at) == list.end()) return "";  // not there
        return UndeliveredPatch(gs.resource_version, current, at, NowText());
      },
      std::nullopt,
      [ns, name, at](const Status& s) {
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
  limit_.Submit([this, what, ns, name,
                 patch = std::move(patch)](runtime::InFlightLimit::Release release) mutable {
    std::make_shared<PatchOp>(client_, what, ns, name, std::move(patch), std::move(release))
        ->Next();
  });
}

}  // namespace aw::gateway
