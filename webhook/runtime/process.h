// The process around the manager, shared by both binaries: signals, the file limit, and the run
// loop (signals received by one thread, the manager run on another).
//
// Promise:
//   - BlockAsyncSignals(), called first in main (before any thread starts: the mask is inherited),
//     blocks every asynchronous signal whose default action would end the process (SIGTERM,
//     SIGINT, SIGHUP, SIGUSR1/2, SIGALRM, real-time signals, ...) in every thread, so that no
//     handler runs on an arbitrary thread, and ignores SIGPIPE outright (a client that hangs up
//     must not kill the process; writes then fail with EPIPE). It returns the blocked set.
//   - RunUntilSignal(manager, signals) runs manager.Run on a thread of its own and waits on the
//     calling thread with sigwait: SIGTERM or SIGINT logs "shutting down" with the signal's name,
//     runs `drain.begin` (when set) and waits `drain.delay` (the admission listener's drain: it
//     keeps answering while readiness fails; cut short if the manager returns meanwhile),
//     requests the manager's stop and joins it; any other signal in the set is logged ("signal
//     ignored") and waited past. When the manager returns by itself (a component failed) it wakes
//     the waiting thread (with SIGRTMIN, which the set must hold) and RunUntilSignal returns at
//     once.
//   - ExitCode(end, requests_left), the same ending for both programs: after a signal, 0
//   ("stopped"),
//     or, when requests or components were still running at the deadline (`requests_left`, or
//     `end.result` not OK), a warning and _Exit(0) at once (their threads still run); after a
//     component failed, "stopped after a component failed" and 1 (_Exit(1) when something
//     outlived the stop deadline).
//   - SignalName(sig) is "SIGTERM" and so on ("signal N" for one without a name).
//   - ParseCommandLine(fs, argc, argv, program) adds --version to `fs` and parses: --help prints
//     the usage to stdout, --version the version text (util/build_info.h), and both give exit code
//     0; a bad flag prints "<program>: <message>" and a hint to stderr and gives exit code 2;
//     nullopt means the flags are set and the program goes on.
//   - RaiseFileLimit() lifts the soft RLIMIT_NOFILE to the hard one (as Go's runtime does): each
//     connection is a file descriptor, and the default soft limit is 1024.
#pragma once

#include <signal.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "runtime/manager.h"
#include "util/flags.h"
#include "util/status.h"

namespace aw::runtime {

sigset_t BlockAsyncSignals();

std::string SignalName(int sig);

void RaiseFileLimit();

std::optional<int> ParseCommandLine(flags::FlagSet& fs, int argc, char** argv,
                                    const std::string& program);

struct RunEnd {
  // True when SIGTERM/SIGINT stopped the manager; false when it returned by itself.
  bool by_signal = false;
  // What Manager::Run returned (after a signal: not OK when something outlived the deadline).
  Status result;
};

// What happens on SIGTERM/SIGINT before the manager is asked to stop (see RunUntilSignal).
struct DrainStep {
  std::function<void()> begin;
  std::chrono::nanoseconds delay{0};
};

RunEnd RunUntilSignal(Manager& manager, const sigset_t& signals, const DrainStep& drain = {});

int ExitCode(const RunEnd& end, bool requests_left);

}  // namespace aw::runtime
