#include "runtime/process.h"

#include <pthread.h>
#include <string.h>
#include <sys/resource.h>

#include <atomic>
#include <stop_token>
#include <thread>

#include "util/log.h"

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

RunEnd RunUntilSignal(Manager& manager, const sigset_t& signals) {
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
    stop.request_stop();
  }
  runner.join();
  return end;
}

}  // namespace aw::runtime
