// Reloader: the one certificate reloader. A value built from files (the serving key pair, the
// client CA bundle), installed once at start and replaced while the process runs only by a newer
// valid one; CertReloader and ClientCaReloader are this with their own reading and parsing.
//
// Promise:
//   - LoadInitial() reads and parses once and installs the result; the read's or the parse's
//     Status otherwise (nothing installed).
//   - Current() returns the last installed value (never a half-built one) or null before the first
//     install. Cheap and thread-safe (one mutex, held for a shared_ptr copy).
//   - A poll (PollOnce(), or the timer's after Start) reads the files. Contents equal to the
//     installed ones, or to the last rejected ones, or a read error equal to the last one, change
//     nothing. Otherwise the contents are parsed: a valid value is installed (on_install runs,
//     `reloads` counts it); an invalid one, or a read error, is looked at again once after
//     `look_again_after` (when not zero: a writer replacing two files one after the other is
//     briefly inconsistent) and then rejected: logged as an error
//     "<what> reload rejected; keeping the previous one" with the reason and `files`, counted in
//     `failures` once per distinct content or read error, and the old value stays.
//   - Start(executor) polls on that executor (an existing io_context; no thread of its own) every
//     `interval` until Stop(); Stop() waits for a poll in progress and is idempotent
//     (PollTimer). PollOnce() sleeps on the calling thread for the second look; the timer never
//     sleeps (the second look is its next poll). An exception from the hooks is logged and
//     counted as a failure; polling goes on.
// Thread-safe: Current() from any thread; the polling (LoadInitial, PollOnce, the timer) from one
// thread at a time (the timer's polls never overlap; tests call PollOnce while it is stopped).
#pragma once

#include <prometheus/counter.h>

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "server/poll_timer.h"
#include "util/io/log.h"
#include "util/io/mutex.h"
#include "util/status.h"

namespace aw::server {

template <typename Contents, typename T>
class Reloader {
 public:
  struct Hooks {
    std::string what;   // "serving certificate", "client CA bundle": the log lines' subject
    std::string files;  // the paths, for the log lines
    std::function<StatusOr<Contents>()> read;
    std::function<StatusOr<std::shared_ptr<const T>>(const Contents&)> parse;
    std::function<void(const T&)> on_install;  // a log line, a gauge
    std::chrono::milliseconds interval{1000};  // between two timer polls
    std::chrono::milliseconds look_again_after{0};
    prometheus::Counter* reloads = nullptr;
    prometheus::Counter* failures = nullptr;
  };

  explicit Reloader(Hooks hooks)
      : hooks_(std::move(hooks)), poller_([this] { return TimerPoll(); }) {}
  ~Reloader() { Stop(); }
  Reloader(const Reloader&) = delete;
  Reloader& operator=(const Reloader&) = delete;

  Status LoadInitial() {
    StatusOr<Contents> contents = hooks_.read();
    if (!contents) return contents.status();
    StatusOr<std::shared_ptr<const T>> value = hooks_.parse(*contents);
    if (!value) return value.status();
    Install(std::move(value).value(), std::move(contents).value());
    return Status::Ok();
  }

  std::shared_ptr<const T> Current() const {
    MutexLock lock(current_mu_);
    return current_;
  }

  // True when a new value was installed.
  bool PollOnce() {
    Step step = Guarded(false);
    if (step == Step::kLookAgain) {
      std::this_thread::sleep_for(hooks_.look_again_after);
      step = Guarded(true);
    }
    return step == Step::kInstalled;
  }

  void Start(boost::asio::any_io_executor executor) {
    poller_.Start(std::move(executor), hooks_.interval);
  }
  void Stop() { poller_.Stop(); }

 private:
  enum class Step { kUnchanged, kInstalled, kLookAgain };

  Step Poll(bool looked_again) {
    StatusOr<Contents> contents = hooks_.read();
    if (contents && loaded_ && *contents == *loaded_) return Step::kUnchanged;
    if (contents && rejected_ && *contents == *rejected_) return Step::kUnchanged;
    if (!contents && read_error_ && contents.status().message() == *read_error_) {
      return Step::kUnchanged;
    }
    StatusOr<std::shared_ptr<const T>> value =
        contents ? hooks_.parse(*contents) : StatusOr<std::shared_ptr<const T>>(contents.status());
    if (!value) {
      if (!looked_again && hooks_.look_again_after.count() > 0) return Step::kLookAgain;
      if (contents) {
        rejected_ = std::move(contents).value();
        read_error_.reset();
      } else {
        read_error_ = contents.status().message();
      }
      Fail(value.status().message());
      return Step::kUnchanged;
    }
    Install(std::move(value).value(), std::move(contents).value());
    if (hooks_.reloads) hooks_.reloads->Increment();
    return Step::kInstalled;
  }

  Step Guarded(bool looked_again) {
    try {
      return Poll(looked_again);
    } catch (const std::exception& e) {
      Fail(e.what());
      return Step::kUnchanged;
    }
  }

  std::chrono::milliseconds TimerPoll() {
    const Step step = Guarded(look_again_pending_);
    look_again_pending_ = step == Step::kLookAgain;
    return look_again_pending_ ? hooks_.look_again_after : hooks_.interval;
  }

  void Fail(const std::string& reason) {
    if (hooks_.failures) hooks_.failures->Increment();
    log::error(hooks_.what + " reload rejected; keeping the previous one",
               {{"error", reason}, {"files", hooks_.files}});
  }

  void Install(std::shared_ptr<const T> value, Contents contents) {
    if (hooks_.on_install) hooks_.on_install(*value);
    {
      MutexLock lock(current_mu_);
      current_ = std::move(value);
    }
    loaded_ = std::move(contents);
    rejected_.reset();
    read_error_.reset();
  }

  const Hooks hooks_;
  // The installed value, read by every handshake. A Mutex, not std::atomic<std::shared_ptr>:
  // libstdc++ 12's load() releases its internal lock with memory_order_relaxed, so a load and the
  // next store of the pointer are not ordered (ThreadSanitizer reports it, rightly).
  mutable Mutex current_mu_;
  std::shared_ptr<const T> current_ GUARDED_BY(current_mu_);
  // The polling thread's own (one poll at a time).
  std::optional<Contents> loaded_;         // contents of the installed value
  std::optional<Contents> rejected_;       // so rejected contents are counted once
  std::optional<std::string> read_error_;  // so a missing file is counted once
  bool look_again_pending_ = false;        // the timer's next poll is the second look
  PollTimer poller_;  // last: stopped (by the destructor) before the state it polls goes
};

}  // namespace aw::server
