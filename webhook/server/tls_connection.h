// TlsConnectionServer: cpp-httplib's SSLServer with its own per-connection loop.
//
// cpp-httplib 0.11 waits for the next keep-alive request by polling every 10 ms and sleeping
// 1 ms in between, on every connection's thread: 300 idle connections cost ~27,000 wakeups/s and
// a busy server spends most of its CPU there (measured: 5x the CPU per request at 256
// connections). This subclass replaces the per-connection loop (the virtual
// process_and_close_socket) and keeps the library's HTTP parsing and routing (process_request):
//   - TLS accept and every read/write are bounded by the read/write timeouts (SO_RCVTIMEO /
//     SO_SNDTIMEO on the socket), so a silent or slow client is cut after the timeout;
//   - between requests the thread blocks in one poll() until the client sends, the keep-alive
//     timeout passes, or Shutdown() is called (an eventfd wakes every idle connection at once, so
//     a graceful stop does not wait for idle keep-alive connections);
//   - at most keep_alive_max_requests requests per connection.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>

#include <httplib.h>

#include "server/listener.h"

namespace aw::server {

struct ConnectionOptions {
  std::chrono::microseconds read_timeout{std::chrono::seconds(10)};
  std::chrono::microseconds write_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds keep_alive_timeout{std::chrono::seconds(120)};
  size_t keep_alive_max_requests = 1'000'000;
};

class TlsConnectionServer final : public WithListener<httplib::SSLServer> {
 public:
  TlsConnectionServer(ConnectionOptions options,
                      const std::function<bool(SSL_CTX&)>& setup_ssl_ctx);
  ~TlsConnectionServer() override;

  // Wakes every connection waiting for its next request; they close. Requests being read or
  // answered finish first. Call before stop().
  void Shutdown();
  // Connections open right now.
  int open_connections() const { return open_.load(); }

 private:
  bool process_and_close_socket(socket_t sock) override;
  // Waits until `ssl` has request bytes: false on keep-alive timeout, hang-up or Shutdown().
  bool WaitForRequest(int fd, SSL* ssl) const;

  const ConnectionOptions options_;
  int wake_fd_ = -1;  // eventfd, readable once Shutdown() was called
  std::atomic<bool> shutting_down_{false};
  std::atomic<int> open_{0};
};

}  // namespace aw::server
