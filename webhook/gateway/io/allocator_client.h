// AllocatorClient: calls agones-allocator's REST API (POST /gameserverallocation) over mutual TLS
// (the gateway's client certificate, the allocator's CA), or plain HTTP for an allocator started
// with --disable-tls (an http:// address), as asynchronous calls of the project's one HTTPS
// client (net/https_client.h): no thread waits for the allocator.
//
// Promise:
//   - Allocate() never blocks: the call starts at once when fewer than `workers` allocator calls
//     are in flight, else it is queued (first in, first out) until one ends. `done` is called
//     exactly once, on the client's I/O thread (it must not block), with the allocator's HTTP
//     status and body, or with a non-OK Status when no HTTP answer came: Unavailable for a
//     connect, TLS or timeout failure or a stopped client; DeadlineExceeded, without any call,
//     when the request's deadline passed while the call was queued (queue time counts against
//     the request's deadline). After Stop(), `done` runs on the calling thread.
//   - The HTTP/1.1 connections are kept alive and reused (the HTTPS client's pool).
//   - One attempt: connect, TLS handshake, each write and each read must each finish within
//     min(`timeout`, time left to the request's deadline when the call starts).
//   - A POST is sent once: never re-sent by the transport, even when a reused keep-alive
//     connection turns out closed (the allocator may have allocated a server for the first copy;
//     sending again could allocate a second one). That failure is Unavailable like any other.
//   - `server_name` replaces the address's host as the TLS SNI and the name verified in the
//     allocator's certificate (Agones' generated `allocator-tls` certificate carries no DNS name
//     that a Service address would match).
//   - Init(executor) loads the PEM files and returns InvalidArgument naming the bad flag or file.
//     The calls run on `executor` (the gateway passes its Kubernetes client's I/O thread, so the
//     two clients share one thread); without one, the client runs an I/O thread of its own.
//   - Stop() (idempotent) fails the queued calls with Unavailable, ends the calls in flight
//     (Unavailable) and returns once no `done` of this client runs any more. Called on the I/O
//     thread (where it could only hang, waiting for callbacks that run there), it aborts the
//     process with a message naming the rule (runtime/io_thread.h). The destructor calls it.
//   - Safe by construction: a call's callback holds the client's shared state (its queue, its
//     counters, the HTTPS client), never the AllocatorClient itself, so no callback can reach a
//     freed client, whatever the order of Stop(), destruction and the answers.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "net/https_client.h"
#include "util/flags.h"
#include "util/status.h"

namespace aw::gateway {

struct AllocatorOptions {
  // https://host[:port][/prefix], or http://... for an allocator started with --disable-tls.
  std::string address = "https://agones-allocator.agones-system.svc:443";
  std::string server_name;       // TLS SNI and verified name ("" = the address's host)
  std::string ca_file;           // the allocator's CA ("" = system roots)
  std::string client_cert_file;  // the gateway's client certificate (mTLS)
  std::string client_key_file;
  // Per attempt, capped by what is left of the request's deadline.
  std::chrono::nanoseconds timeout = std::chrono::seconds(10);
  size_t workers = 8;  // allocator calls in flight at most (--allocator-workers)
};

// The allocator client's flags (--allocator-*), each defaulting to the struct's value.
void RegisterAllocatorFlags(flags::FlagSet& fs, AllocatorOptions* o);
// InvalidArgument naming the flag when the options cannot work (no --allocator-address).
Status ValidateAllocatorOptions(const AllocatorOptions& o);

struct AllocatorAnswer {
  Status status;  // non-OK: no HTTP answer
  int http_status = 0;
  std::string body;
};

class AllocatorClient {
 public:
  explicit AllocatorClient(AllocatorOptions options);
  ~AllocatorClient();
  AllocatorClient(const AllocatorClient&) = delete;
  AllocatorClient& operator=(const AllocatorClient&) = delete;

  // `executor`: where the calls run; none = an I/O thread of the client's own.
  Status Init(boost::asio::any_io_executor executor = {});
  void Start();  // calls queued before it start now
  void Stop();   // see the promise; idempotent

  using Done = std::function<void(AllocatorAnswer)>;
  // `deadline`: the request's; the call is not made once it has passed.
  void Allocate(std::string body, std::chrono::steady_clock::time_point deadline, Done done);
  // The timeout of an attempt that starts at `now`: min(per-attempt timeout, time left);
  // zero or less means the deadline passed in the queue.
  static std::chrono::milliseconds AttemptTimeout(std::chrono::nanoseconds per_attempt,
                                                  std::chrono::steady_clock::time_point deadline,
                                                  std::chrono::steady_clock::time_point now);
  bool plain() const { return plain_; }

 private:
  // Everything a call's callback touches: shared by the client and the callbacks in flight.
  struct State;

  const AllocatorOptions options_;
  struct OwnIo;                    // an io_context and its thread, when Init() got no executor
  std::unique_ptr<OwnIo> own_io_;  // joined by the destructor before state_ goes
  boost::asio::any_io_executor executor_;  // where the calls run (Stop's contract)
  std::string base_path_;
  bool plain_ = false;
  std::shared_ptr<State> state_;
};

}  // namespace aw::gateway
