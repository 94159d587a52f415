#include "kube/backoff.h"

#include <algorithm>
#include <memory>
#include <random>

namespace aw::kube {

Backoff::Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max, double jitter,
                 Rand01 rand)
    : initial_(std::max(initial, std::chrono::milliseconds(1))),
      max_(std::max(max, initial_)),
      jitter_(std::clamp(jitter, 0.0, 1.0)),
      rand_(std::move(rand)) {
  if (!rand_) {
    auto gen = std::make_shared<std::mt19937_64>(std::random_device{}());
    rand_ = [gen] { return std::uniform_real_distribution<double>(0.0, 1.0)(*gen); };
  }
}

std::chrono::milliseconds Backoff::Next() {
  double base = static_cast<double>(initial_.count());
  for (int i = 0; i < attempt_ && base < static_cast<double>(max_.count()); ++i) base *= 2;
  base = std::min(base, static_cast<double>(max_.count()));
  if (attempt_ < 64) ++attempt_;
  double r = std::clamp(rand_(), 0.0, 1.0);
  double factor = 1.0 - jitter_ + 2.0 * jitter_ * r;
  double v = std::max(0.0, base * factor);
  return std::chrono::milliseconds(static_cast<int64_t>(v));
}

}  // namespace aw::kube
