// Prober: HTTP, TCP and UDP readiness probes from outside the game server's pod.
//
// Promise:
//   - Probe() never blocks on the network: it queues the request and returns. Every probe runs on
//     one event loop (asynchronous connect, read and write, a steady_timer per probe as its
//     deadline): the executor given to Create() (the process's runtime::Dispatcher), else an Asio
//     io_context the prober owns with a thread of its own; so thousands of probes need no more
//     threads, and admission (other threads) is never slowed down.
//   - At most `max_concurrency` probes have a socket open at once; the rest wait in FIFO order.
//   - Each probe ends within its timeout (Target::timeout, else `timeout`) of its start (kTimeout
//     otherwise) and its callback runs exactly once, on the prober's event loop (or, for probes
//     still pending when the prober is destroyed, on the destroying thread with kError "prober
//     stopped"). A callback that throws is logged; the loop goes on.
//   - Destruction on a given executor: the handlers hold a runtime::Lifeline; the destructor waits
//     for one that runs, and a handler that runs later (or is destroyed unrun with the io_context,
//     which must outlive the prober) does nothing. It must not run on the executor's thread (it
//     aborts, runtime/io_thread.h).
//   - HTTP: a minimal HTTP/1.1 GET (no TLS); ready on a 2xx status line. TCP: ready when connect
//     succeeds. UDP: sends the payload on a connected socket; ready when any datagram comes back
//     before the timeout; ICMP port-unreachable is a failure.
//   - Host names (not IP literals) are resolved with getaddrinfo on the prober thread and cached
//     for 30 s; Agones addresses are normally node IPs, which need no resolution.
//   - Create() is the only way to make one: when the operating system refuses the event loop
//     (the io_context's eventfd/epoll/timerfd, or its thread) it returns that error as a Status;
//     a SocketProber that exists always runs its loop.
//   - Why not the admission listener's io threads: probe callbacks take the resolver's lock, which
//     admission latency must not wait on, and the listener's io threads stop at another point of
//     shutdown than the resolver (docs/design.md, the thread table).
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "probe/core/probe.h"
#include "util/io/mutex.h"
#include "util/status.h"
#include "util/thread_annotations.h"

namespace aw::probe {

// What the resolver needs from a prober (a port, so tests can use a fake).
class Prober {
 public:
  virtual ~Prober() = default;
  virtual void Probe(const Target& target, Callback done) = 0;
};

struct ProberOptions {
  std::chrono::milliseconds timeout{200};
  size_t max_concurrency = 256;
  std::string udp_payload = "ping";
};

class SocketProber final : public Prober {
  struct PassKey {
    explicit PassKey() = default;
  };

 public:
  // The prober with its event loop running, or kIOError naming what the system refused.
  // `executor`: the loop to run on (the process's dispatcher); empty: an io_context and thread of
  // the prober's own.
  static StatusOr<std::unique_ptr<SocketProber>> Create(ProberOptions options,
                                                        boost::asio::any_io_executor executor = {});

  // Use Create().
  SocketProber(PassKey, ProberOptions options);
  ~SocketProber() override;
  SocketProber(const SocketProber&) = delete;
  SocketProber& operator=(const SocketProber&) = delete;

  void Probe(const Target& target, Callback done) override;

  // Probes with an open socket right now (for tests and metrics).
  size_t Active() const { return active_count_.load(std::memory_order_relaxed); }

 private:
  struct Request {
    Target target;
    Callback done;
  };
  class Loop;

  ProberOptions options_;
  Mutex mu_;  // the queue handed from Probe's callers to the loop thread, and the stop flag
  std::deque<Request> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::atomic<size_t> active_count_{0};
  std::unique_ptr<Loop> loop_;  // the io_context and every in-flight probe
  std::thread thread_;          // without a given executor
};

}  // namespace aw::probe
