// Dispatcher: the process's one control dispatcher (Envoy's main dispatcher): one io_context run by
// one thread, on which every component that is not admission or listener connection work runs as
// asynchronous work (the health port's connections and the certificate pollers, the prober, the
// gateway's waiter timers). The admission and listener io threads stay apart, so admission latency
// never waits on this work (docs/design.md, the Threads table).
//
// Promise:
//   - Start() makes the io_context and its thread; the thread runs the io_context until Stop(),
//     also while it has no work (a work guard). An exception escaping a handler is logged (with
//     the dispatcher's name) and the loop goes on.
//   - executor() is valid from Start() until the Dispatcher is destroyed; work posted to it after
//     Stop() never runs (it is destroyed with the io_context, when the Dispatcher is).
//   - Stop(deadline) (idempotent): drops the work guard and waits, until `deadline`, for the
//     io_context to run out of work (every component on it has stopped: no socket, timer or handler
//     left); then the thread is joined. OK when it ran out of work; DeadlineExceeded (logged) when
//     work was left at the deadline: the io_context is then stopped and the work left is destroyed
//     unrun with the Dispatcher. The destructor is Stop() with a 5 s deadline.
//   - The order at shutdown: every component on the dispatcher stops first (its Stop cancels its
//     sockets and timers and waits for its callbacks, never on this thread), then the process
//     stops the dispatcher, and the Dispatcher is destroyed after every component that holds its
//     executor (declared before them).
//   - Stop() called on the dispatcher's own thread would wait for itself: it aborts the process
//     with a message naming the rule (runtime/io_thread.h).
// Thread-safe: executor() and Running() from any thread; Stop() from any thread but its own.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "util/status.h"

namespace aw::runtime {

class Dispatcher {
 public:
  // The dispatcher with its thread running, or IOError naming what the system refused (the
  // io_context's descriptors or the thread).
  static StatusOr<std::unique_ptr<Dispatcher>> Start(std::string name = "dispatcher");
  ~Dispatcher();
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  boost::asio::any_io_executor executor() const;
  Status Stop(std::chrono::steady_clock::time_point deadline);
  // Started and not stopped.
  bool Running() const;

  struct Impl;

 private:
  explicit Dispatcher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace aw::runtime
