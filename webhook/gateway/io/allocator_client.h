// AllocatorClient: calls agones-allocator's REST API (POST /gameserverallocation) over mutual TLS
// (the gateway's client certificate, the allocator's CA), from a fixed pool of worker threads.
//
// Promise:
//   - Allocate() never blocks: the call is queued and run by one of `workers` threads (at most
//     that many allocator calls at once; the HTTP/1.1 connections are kept alive and reused,
//     kube/transport.h), and `done` is called on that worker thread with the allocator's HTTP
//     status and body, or with a non-OK Status (Unavailable) when no HTTP answer came: connect,
//     TLS or timeout failure, or the client is stopped.
//   - Init() loads the PEM files and returns InvalidArgument naming the bad flag or file.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kube/transport.h"
#include "util/status.h"

namespace aw::gateway {

struct AllocatorOptions {
  std::string address = "https://agones-allocator.agones-system.svc:443";
  std::string ca_file;           // the allocator's CA ("" = system roots)
  std::string client_cert_file;  // the gateway's client certificate (mTLS)
  std::string client_key_file;
  std::chrono::nanoseconds timeout = std::chrono::seconds(10);  // per call, capped by the request
  size_t workers = 8;
};

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

  Status Init();
  void Start();
  void Stop();  // fails queued calls with Unavailable, joins the workers; idempotent

  using Done = std::function<void(AllocatorAnswer)>;
  void Allocate(std::string body, std::chrono::milliseconds timeout, Done done);

 private:
  struct Call {
    std::string body;
    std::chrono::milliseconds timeout;
    Done done;
  };
  void Work();

  const AllocatorOptions options_;
  std::unique_ptr<kube::Transport> transport_;
  std::string base_path_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Call> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace aw::gateway
