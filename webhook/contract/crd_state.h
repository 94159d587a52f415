// CrdReadiness: whether the GameServer CRD's status.state enum is known to accept "Allocating".
//
// The mutating webhook rewrites Allocated -> Allocating only while this says true; otherwise it
// fails open (allows unchanged, with a warning). Today the answer comes from a flag
// (--crd-accepts-allocating); the CRD guard (webhook/kube) publishes a live answer through the
// same interface. Implementations must be cheap and thread-safe: it is read on every request.
#pragma once

#include <atomic>

namespace aw::contract {

class CrdReadiness {
 public:
  virtual ~CrdReadiness() = default;
  virtual bool AcceptsAllocating() const = 0;
};

// A value set once at start (the flag) or updated by a watcher (the CRD guard).
class AtomicCrdReadiness final : public CrdReadiness {
 public:
  explicit AtomicCrdReadiness(bool initial) : accepts_(initial) {}
  bool AcceptsAllocating() const override { return accepts_.load(std::memory_order_acquire); }
  void Set(bool accepts) { accepts_.store(accepts, std::memory_order_release); }

 private:
  std::atomic<bool> accepts_;
};

}  // namespace aw::contract
