// The connection-cap policy: which open connection to close so that a new one can be admitted.
//
// Promise (pure; no I/O, no clocks): at the cap, a new connection is always admitted and one open
// connection is chosen to make room:
//   1. an idle keep-alive connection (between two requests; a new connection that has not sent
//      its first request yet is not idle), the one idle the longest;
//   2. if none is idle, the connection whose current phase (TLS handshake or the wait for a first
//      request, request being read, response being written) started earliest;
//   3. only when every other connection is waiting for its answer (kWaiting: a complete request
//      handed to an asynchronous handler, e.g. an allocation waiting for its GameServer), the one
//      that has waited longest. So idle, unauthenticated or half-sent connections (bare TCP
//      connects included) never push out a request that is being served.
// A client that opens a connection and finishes its request within milliseconds is therefore
// never the one chosen while older connections exist, so slow clients (slowloris: a byte every
// few seconds) can fill the cap but cannot hold it: each new connection evicts the oldest of them.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>

namespace aw::server {

enum class ConnPhase {
  kHandshake,  // opening: TLS handshake, then the wait for the first request (since accept)
  kIdle,       // keep-alive, between two requests
  kRequest,    // a request being read (since its first byte)
  kResponse,   // a response being written, or the connection closing
  kWaiting,    // a whole request is with an asynchronous handler, waiting for its answer
};

struct ConnSnapshot {
  uint64_t id = 0;
  ConnPhase phase = ConnPhase::kHandshake;
  std::chrono::steady_clock::time_point since;  // when the current phase started
};

// The id of the connection to close; nullopt when `open` is empty.
std::optional<uint64_t> ChooseVictim(std::span<const ConnSnapshot> open);

}  // namespace aw::server
