#include "runtime/process.h"

#include <pthread.h>
#include <string.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <stop_token>
#include <thread>

#include "util/io/build_info.h"
#include "util/io/log.h"

namespace aw::runtime {

sigset_t BlockAsyncSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGIO,
                  SIGPWR, SIGSTKFLT, SIGXCPU, SIGXFSZ}) {
    sigaddset(&set, sig);
  }
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return set;
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

void RaiseFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

std::optional<int> ParseCommandLine(flags::FlagSet& fs, int argc, char** argv,
                                    const std::string& program) {
  bool show_version = false;
  fs.Bool("version", &show_version, "print the version, commit and build date, and exit");
  auto parsed = fs.Parse(argc, argv);
  if (parsed.status == flags::FlagSet::Status::kHelp) {
    std::fputs(fs.Usage().c_str(), stdout);
    return 0;
  }
  if (parsed.status == flags::FlagSet::Status::kError) {
    std::fprintf(stderr, "%s: %s\nRun with --help for the list of flags.\n", program.c_str(),
                 parsed.message.c_str());
    return 2;
  }
  if (show_version) {
    std::fputs(build::VersionText(program).c_str(), stdout);
    return 0;
  }
  return std::nullopt;
}

RunEnd RunUntilSignal(Manager& manager, const sigset_t& signals, const DrainStep& drain) {
  const int wake_signal = SIGRTMIN;
  const pthread_t waiting_thread = pthread_self();
  std::stop_source stop;
  std::atomic<bool> finished{false};
  RunEnd end;
  std::jthread runner([&] {
    end.result = manager.Run(stop.get_token());
    finished = true;
    pthread_kill(waiting_thread, wake_signal);
  });
  int sig = 0;
  for (;;) {
    if (sigwait(&signals, &sig) != 0) continue;
    if (finished) break;
    if (sig == SIGTERM || sig == SIGINT) break;
    log::warn("signal ignored", {{"signal", SignalName(sig)}});
  }
  if (!finished) {
    log::info("shutting down", {{"signal", SignalName(sig)}});
    end.by_signal = true;
    if (drain.begin) {
      drain.begin();
      log::info("draining: readiness fails, answers close their connections",
                {{"drain_delay_seconds",
                  std::to_string(std::chrono::duration<double>(drain.delay).count())}});
      const auto until = std::chrono::steady_clock::now() + drain.delay;
      while (!finished && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    stop.request_stop();
  }
  runner.join();
  return end;
}

int ExitCode(const RunEnd& end, bool requests_left) {
  const Status& result = end.result;
  if (end.by_signal) {
    if (requests_left || !result.ok()) {
      // A request or a component still running after the grace period (a stuck client, a call
      // that would not end): exit anyway, without waiting for their threads.
      log::warn(requests_left ? "requests still in progress after --shutdown-grace; exiting"
                              : "components still running after --shutdown-grace; exiting",
                {{"error", result.ToString()}});
      std::fflush(stderr);
      std::_Exit(0);
    }
    log::info("stopped");
    return 0;
  }
  // A component failed (at start: a port in use; or later): it logged why; everything else has
  // been stopped.
  log::error("stopped after a component failed", {{"error", result.ToString()}});
  std::fflush(stderr);
  if (result.code() == Status::Code::kDeadlineExceeded) std::_Exit(1);
  return 1;
}

}  // namespace aw::runtime
