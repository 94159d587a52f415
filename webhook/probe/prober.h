// Prober: HTTP, TCP and UDP readiness probes from outside the game server's pod.
//
// Promise:
//   - Probe() never blocks on the network: it queues the request and returns. Every probe runs on
//     the prober's single event-loop thread (epoll + non-blocking sockets), so thousands of probes
//     need no more threads, and admission (other threads) is never slowed down.
//   - At most `max_concurrency` probes have a socket open at once; the rest wait in FIFO order.
//   - Each probe ends within its timeout (Target::timeout, else `timeout`) of its start (kTimeout
//   otherwise) and its callback runs
//     exactly once, on the prober's thread (or, for probes still pending when the prober is
//     destroyed, on the destroying thread with kError "prober stopped").
//   - HTTP: a minimal HTTP/1.1 GET (no TLS); ready on a 2xx status line. TCP: ready when connect
//     succeeds. UDP: sends the payload on a connected socket; ready when any datagram comes back
//     before the timeout; ICMP port-unreachable is a failure.
//   - Host names (not IP literals) are resolved with getaddrinfo on the prober thread and cached
//     for 30 s; Agones addresses are normally node IPs, which need no resolution.
//   - Create() is the only way to make one: when the operating system refuses the event loop
//     (eventfd, epoll, its thread) it returns that error as a Status; a SocketProber that exists
//     always runs its loop.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "probe/core/probe.h"
#include "util/status.h"

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
  // The prober with its event loop running, or kIOError naming the system call that failed.
  static StatusOr<std::unique_ptr<SocketProber>> Create(ProberOptions options);

  // Use Create(). `wake_fd` (an eventfd) and `epoll_fd` (watching it) are owned from here on.
  SocketProber(PassKey, ProberOptions options, int wake_fd, int epoll_fd);
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
  std::mutex mu_;
  std::deque<Request> queue_;  // guarded by mu_
  bool stopping_ = false;      // guarded by mu_
  int wake_fd_ = -1;
  std::atomic<size_t> active_count_{0};
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace aw::probe
