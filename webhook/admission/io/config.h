// The server's configuration and the command-line flags that set it.
//
// Promise: RegisterServerFlags / RegisterPolicyFlags bind every server and admission-policy knob
// to a flag whose --help default is the struct's default; Validate reports inconsistent
// combinations (e.g. missing certificate files) as one message. No I/O.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "admission/io/server.h"
#include "policy/policy.h"
#include "server/drain_delay.h"
#include "server/health_server.h"
#include "util/flags.h"
#include "util/status.h"

namespace aw::admission {

struct ServerConfig {
  server::ConnectionOptions https;  // the admission listener (its defaults are the flags' defaults)
  int health_port = 8081;
  server::HealthOptions health;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::chrono::nanoseconds cert_reload_interval = std::chrono::seconds(1);
  bool crd_accepts_allocating = false;
  // On SIGTERM: how long to wait for in-flight requests before exiting anyway.
  std::chrono::nanoseconds shutdown_grace = std::chrono::seconds(25);
  // On SIGTERM, first: how long the listener keeps accepting and keeps its idle connections while
  // readiness fails and every answer closes its connection (ConnectionServer::BeginDrain).
  std::chrono::nanoseconds drain_delay{0};
};

void RegisterServerFlags(flags::FlagSet& fs, ServerConfig* cfg);
void RegisterPolicyFlags(flags::FlagSet& fs, policy::Policy* policy);

// The first problem found, or nullopt.
Status Validate(const ServerConfig& cfg, const policy::Policy& policy);

}  // namespace aw::admission
