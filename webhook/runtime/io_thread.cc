#include "runtime/io_thread.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/require.hpp>
#include <boost/asio/strand.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>

#include "util/io/log.h"

namespace aw::runtime {
namespace {

[[noreturn]] void Die(std::string_view what) {
  DieBrokenContract(std::string(what) +
                    " called on its own I/O thread: it waits for callbacks that run on that "
                    "thread and would never return (call it from another thread)");
}

}  // namespace

void DieBrokenContract(std::string_view message) {
  const std::string msg(message);
  log::error("fatal: thread contract broken", {{"error", msg}});
  std::fprintf(stderr, "fatal: %s\n", msg.c_str());
  std::fflush(stderr);
  std::abort();
}

bool RunningOn(const boost::asio::any_io_executor& executor) {
  namespace asio = boost::asio;
  using IoEx = asio::io_context::executor_type;
  using Tracked = std::decay_t<decltype(asio::require(std::declval<IoEx>(),
                                                      asio::execution::outstanding_work.tracked))>;
  if (!executor) return false;
  if (const auto* e = executor.target<IoEx>()) return e->running_in_this_thread();
  if (const auto* e = executor.target<Tracked>()) return e->running_in_this_thread();
  // A strand's own running_in_this_thread means "inside the strand": the thread is its inner one's.
  if (const auto* s = executor.target<asio::strand<IoEx>>()) {
    return s->get_inner_executor().running_in_this_thread();
  }
  if (const auto* s = executor.target<asio::strand<asio::any_io_executor>>()) {
    return RunningOn(s->get_inner_executor());
  }
  return false;
}

void DieIfOn(const boost::asio::any_io_executor& executor, std::string_view what) {
  if (RunningOn(executor)) Die(what);
}

void DieIfThread(std::thread::id io_thread, std::string_view what) {
  if (io_thread != std::thread::id() && io_thread == std::this_thread::get_id()) Die(what);
}

}  // namespace aw::runtime
