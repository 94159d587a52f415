// TlsConnectionServer: cpp-httplib's SSLServer with its own connection handling.
//
// cpp-httplib 0.11 serves each connection on one thread from accept to close, and waits for the
// next keep-alive request by polling every 10 ms. This subclass replaces the per-connection loop
// (the virtual process_and_close_socket) and keeps the library's HTTP parsing and routing
// (process_request):
//   - the accept task (httplib's task queue; AdmissionServer runs it on the accept thread) takes a
//     connection slot (at most `max_connections` open; beyond that new connections wait for a
//     slot, logged once per burst) and parks the socket; workers run the TLS handshake
//     non-blocking, step by step; between handshake steps and between requests the connection is
//     parked in one epoll set (EPOLLONESHOT): an idle keep-alive connection or a client that never
//     sends its ClientHello holds no thread and costs no CPU; a handshake not done within
//     `read_timeout` is cut;
//   - a small pool of workers waits on that epoll set; a worker that takes a readable connection
//     serves its request(s) with blocking TLS reads/writes bounded by the read/write timeouts
//     (SO_RCVTIMEO / SO_SNDTIMEO), then re-parks it and takes the next ready one without a thread
//     switch. One worker serves a busy core; when every worker has been stuck (a slow or silent
//     client mid-request: blocked, not merely waiting for the CPU) for a few milliseconds while
//     connections are ready, a monitor starts another worker (bounded by `max_connections`), so a slow client never delays the others;
//     workers above `min_workers` exit after a minute without work;
//   - a parked connection is closed after `keep_alive_timeout`, or at once on Shutdown();
//     requests being read or answered finish first; at most keep_alive_max_requests requests per
//     connection.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include <sys/types.h>

#include <httplib.h>

#include "server/listener.h"

namespace aw::server {

struct ConnectionOptions {
  std::chrono::microseconds read_timeout{std::chrono::seconds(10)};
  std::chrono::microseconds write_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds keep_alive_timeout{std::chrono::seconds(120)};
  size_t keep_alive_max_requests = 1'000'000;
  size_t max_connections = 1024;
  size_t min_workers = 1;
  std::chrono::milliseconds worker_idle_exit{std::chrono::seconds(60)};
};

class TlsConnectionServer final : public WithListener<httplib::SSLServer> {
 public:
  TlsConnectionServer(ConnectionOptions options,
                      const std::function<bool(SSL_CTX&)>& setup_ssl_ctx);
  ~TlsConnectionServer() override;

  // Closes every parked (idle) connection at once; connections being served close after their
  // current request; new connections are refused. Call before stop().
  void Shutdown();
  // After Shutdown() and stop(): waits until every connection is closed and the workers exited.
  void Join();
  // Connections open right now.
  int open_connections() const { return open_.load(); }
  // Worker threads running right now.
  size_t workers() const { return workers_.load(); }

 private:
  struct Conn;

  bool process_and_close_socket(socket_t sock) override;
  void Serve(Conn* conn);
  void Handshake(Conn* conn);      // one non-blocking step of the TLS handshake
  void ServeRequests(Conn* conn);  // the requests ready on an established connection
  void ParkOrClose(Conn* conn);
  void Close(Conn* conn);
  void StartWorker();  // mu_ held
  void Worker();
  void Monitor();

  const ConnectionOptions options_;
  const int epoll_fd_;
  const int wake_fd_;  // eventfd in the epoll set (level-triggered): readable once Join() ends

  mutable std::mutex mu_;
  std::condition_variable slot_cv_;     // a connection slot freed, or shutting down
  std::condition_variable closed_cv_;   // a connection closed or a worker exited
  std::condition_variable monitor_cv_;  // wakes the monitor
  std::unordered_map<Conn*, std::unique_ptr<Conn>> conns_;  // mu_
  bool limit_logged_ = false;                                // mu_
  bool exiting_ = false;                                     // mu_: Join() is ending
  size_t live_workers_ = 0;                                  // mu_ (workers are detached)
  std::vector<pid_t> worker_tids_;                           // mu_

  std::atomic<bool> shutting_down_{false};
  std::atomic<int> open_{0};
  std::atomic<size_t> workers_{0};
  std::atomic<size_t> waiting_{0};   // workers blocked in epoll_wait
  std::atomic<uint64_t> progress_{0};  // events taken + requests served
  std::atomic<bool> monitor_dozing_{false};
  std::thread monitor_;
};

}  // namespace aw::server
