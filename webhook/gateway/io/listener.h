// The allocation gateway's listener as flags: its address and ports, its TLS material (serving
// key pair, client CAs) and its connection limits, registered by RegisterListenerFlags and turned
// into the ConnectionServer's options by ListenerOptions.
//
// Promise: every flag's --help default is the struct's default; ListenerOptions gives the
// gateway's listener REST and gRPC on one port (HTTP/2 by ALPN, 1,000 streams a connection: a
// matchmaker's connection holds one stream per waiting allocation). No I/O.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "server/connection_server.h"
#include "util/flags.h"

namespace aw::gateway {

struct ListenerFlags {
  std::string bind_address = "0.0.0.0";
  int port = 8443;
  int health_port = 8080;
  std::string tls_cert_file = "/certs/tls.crt";
  std::string tls_key_file = "/certs/tls.key";
  std::string client_ca_file = "/client-ca/ca.crt";
  std::string client_ca_dir;
  bool disable_mtls = false;
  std::chrono::nanoseconds reload_interval = std::chrono::seconds(1);
  size_t io_threads = 2;
  size_t max_connections = 4096;
  size_t max_body_bytes = 1024 * 1024;
  std::chrono::nanoseconds read_timeout = std::chrono::seconds(10);
  std::chrono::nanoseconds idle_timeout = std::chrono::seconds(120);
};

void RegisterListenerFlags(flags::FlagSet& fs, ListenerFlags* f);

// The client CA path in force: --client-ca-dir when set, else --client-ca-file.
inline const std::string& ClientCaPath(const ListenerFlags& f) {
  return f.client_ca_dir.empty() ? f.client_ca_file : f.client_ca_dir;
}

server::ConnectionOptions ListenerOptions(const ListenerFlags& f);

}  // namespace aw::gateway
