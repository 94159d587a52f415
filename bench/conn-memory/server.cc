// conn_memory_server: the project's TLS listener (server::ConnectionServer, as allocation-gateway
// runs it: mutual TLS, an asynchronous handler) holding every request it gets without answering,
// until it is sent SIGUSR1 (then it answers all of them) or SIGTERM. bench/conn-memory/run drives
// it and reads its /proc/PID/status; nothing here measures.
//
//   conn_memory_server CERT KEY CLIENT_CA PORT [IO_THREADS]
// Prints "ready" on stdout once it listens, then "held N" when N (1, or a multiple of 100) are
// held.
#include <prometheus/registry.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/cert_reloader.h"
#include "server/client_ca_reloader.h"
#include "server/connection_server.h"

using namespace aw;  // a bench program: one main

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s CERT KEY CLIENT_CA PORT [IO_THREADS]\n", argv[0]);
    return 2;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any thread starts

  prometheus::Registry registry;
  server::CertReloader certs(argv[1], argv[2], registry);
  server::ClientCaReloader ca(argv[3], registry);
  if (Status s = certs.LoadInitial(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  if (Status s = ca.LoadInitial(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::mutex mu;
  std::vector<server::Responder> held;
  server::ConnectionOptions co;
  co.name = "gateway";
  co.bind_address = "127.0.0.1";
  co.port = std::stoi(argv[4]);
  co.io_threads = argc > 5 ? std::stoul(argv[5]) : 2;
  co.max_connections = 4096;
  server::ConnectionServer listener(
      co,
      [&](const server::HttpRequest&, server::Responder r) {
        std::lock_guard lock(mu);
        held.push_back(std::move(r));
        if (held.size() == 1 || held.size() % 100 == 0) {
          std::printf("held %zu\n", held.size());
          std::fflush(stdout);
        }
      },
      &certs, &ca, registry);
  if (Status s = listener.Start(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) {
    int sig = 0;
    sigwait(&set, &sig);
    std::vector<server::Responder> answer;
    {
      std::lock_guard lock(mu);
      answer.swap(held);
    }
    for (auto& r : answer) r(server::HttpResponse{200, "application/json", "{\"ok\":true}\n", {}});
    std::printf("answered %zu\n", answer.size());
    std::fflush(stdout);
    if (sig != SIGUSR1) break;
  }
  listener.Stop();
  listener.WaitStopped(std::chrono::seconds(5));
  return 0;
}
