// The Stop contract of the asynchronous components, enforced: a component whose Stop() waits for
// its callbacks to end (they run on an I/O thread) must never be stopped from that thread, where
// the wait could never end. These checks turn that deadlock into an immediate, named failure.
//
// Promise:
//   - RunningOn(executor) is true when the calling thread is running the io_context behind
//     `executor` (an io_context's executor, tracked or not, or a strand of one, held in an
//     any_io_executor); false for any other thread or any other kind of executor.
//   - DieIfOn(executor, what) and DieIfThread(id, what) return when the calling thread is not the
//     I/O thread; otherwise they write one line naming `what` and the rule to stderr and the log,
//     and abort the process (a programming error: it would otherwise hang forever, silently).
//   - DieBrokenContract(message) is that failure for other waits of the same kind: it writes
//     "fatal: <message>" to stderr and the log and aborts.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <string_view>
#include <thread>

namespace aw::runtime {

bool RunningOn(const boost::asio::any_io_executor& executor);

void DieIfOn(const boost::asio::any_io_executor& executor, std::string_view what);
void DieIfThread(std::thread::id io_thread, std::string_view what);
[[noreturn]] void DieBrokenContract(std::string_view message);

}  // namespace aw::runtime
