// Capped exponential backoff with jitter.
//
// Promise: Next() returns initial, 2*initial, 4*initial, ... capped at max, each multiplied by a
// random factor in [1 - jitter, 1 + jitter] and never above max*(1+jitter) nor below 0; Reset()
// starts over. The random source is injectable so bounds are testable. Pure (no clock, no sleep).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

namespace aw::kube {

class Backoff {
 public:
  using Rand01 = std::function<double()>;  // uniform in [0, 1)
  Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max, double jitter = 0.2,
          Rand01 rand = {});
  std::chrono::milliseconds Next();
  void Reset() { attempt_ = 0; }
  int attempt() const { return attempt_; }

 private:
  std::chrono::milliseconds initial_, max_;
  double jitter_;
  Rand01 rand_;
  int attempt_ = 0;
};

}  // namespace aw::kube
