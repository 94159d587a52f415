// Allocations per admission request (issue 36): a dedicated binary that counts every heap
// allocation (malloc/calloc/realloc wrapped; operator new under a sanitizer), driving the
// allocator's full UPDATE review (the benchmark's request) through admission::Handle (the decision
// and its answer) and through AdmissionPipeline::Serve (with the metrics and the decision log line,
// written to /dev/null), after a warm-up on the same thread. Prints the figures; fails when one
// exceeds its budget (AW_ALLOC_BUDGET_* below), so that a change that puts malloc back on the
// steady-state path is seen. The document path (HandleReference) is measured too, for comparison.
//
//   build/admission_allocs [path/to/review.json]
#include <prometheus/registry.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <sstream>
#include <string>

#include "admission/handle_reference.h"
#include "admission/handler.h"
#include "admission/io/metrics.h"
#include "admission/io/pipeline.h"
#include "contract/crd_state.h"
#include "policy/policy.h"
#include "util/io/log.h"

// The replacements below pair operator new with malloc and operator delete with free, by design.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

// What is counted: in a plain build every malloc, calloc and realloc call (the functions below
// wrap glibc's own, so operator new, RapidJSON's CrtAllocator and every library are seen once);
// under a sanitizer, which owns malloc, the operator new calls only.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define AW_COUNT_MALLOC 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define AW_COUNT_MALLOC 0
#else
#define AW_COUNT_MALLOC 1
#endif
#else
#define AW_COUNT_MALLOC 1
#endif

namespace {

std::atomic<uint64_t> g_allocations{0};
// operator new counts itself only when malloc is not counted (it calls malloc).
constexpr bool kNewCounts = !AW_COUNT_MALLOC;

}  // namespace

#if AW_COUNT_MALLOC
// glibc's allocator under another name: these wrap it, so memory from either is freed by free().
extern "C" void* __libc_malloc(std::size_t);
extern "C" void* __libc_calloc(std::size_t, std::size_t);
extern "C" void* __libc_realloc(void*, std::size_t);
extern "C" void* malloc(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(n);
}
extern "C" void* calloc(std::size_t a, std::size_t b) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_calloc(a, b);
}
extern "C" void* realloc(void* p, std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_realloc(p, n);
}
#endif

void* operator new(std::size_t n) {
  if (kNewCounts) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (kNewCounts) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// The nothrow forms too (std::stable_sort's temporary buffer uses them): every allocation form that
// the frees below release must come from malloc, or ASan reports an alloc-dealloc mismatch.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  if (kNewCounts) g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  if (kNewCounts) g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
// The aligned forms (over-aligned types) with aligned_alloc, released by their own deletes.
void* operator new(std::size_t n, std::align_val_t a) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);  // aligned_alloc is not wrapped
  const std::size_t al = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(al, ((n ? n : 1) + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace {

// Budgets per request (the figures measured when this test was written, with a little room).
constexpr double kBudgetHandle = AW_ALLOC_BUDGET_HANDLE;
constexpr double kBudgetServe = AW_ALLOC_BUDGET_SERVE;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

template <typename F>
double PerCall(F&& f, int n) {
  for (int i = 0; i < 50; ++i) f();  // warm-up: per-thread buffers reach their size
  const uint64_t before = g_allocations.load();
  for (int i = 0; i < n; ++i) f();
  return static_cast<double>(g_allocations.load() - before) / n;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path =
      argc > 1 ? argv[1]
               : std::string(AW_SOURCE_DIR) + "/test/fixtures/reviews/v1-allocator-update.json";
  // The benchmark posts the review as compact JSON; the fixture's whitespace changes nothing here.
  const std::string body = ReadFile(path);
  if (body.empty()) {
    std::fprintf(stderr, "admission_allocs: cannot read %s\n", path.c_str());
    return 2;
  }
  aw::policy::Policy policy;
  policy.trusted_users = {"system:serviceaccount:allocating-system:allocating-webhook"};
  const auto now = std::chrono::system_clock::now();
  aw::admission::Context ctx{policy, true, now};
  const auto route = aw::admission::Route::kMutateGameServers;

  // Each route answers the review as expected before its allocations are counted.
  auto answers = [&](aw::admission::Route r, aw::admission::Outcome want) {
    const aw::admission::HandlerResult check = aw::admission::Handle(r, body, ctx);
    if (check.http_status == 200 && check.outcome == want) return true;
    std::fprintf(stderr, "admission_allocs: unexpected answer on %s: %d %s\n",
                 std::string(aw::admission::RoutePath(r)).c_str(), check.http_status,
                 check.body.c_str());
    return false;
  };
  // The same review on /validate/gameservers (the one pass too; allowed).
  const auto validate = aw::admission::Route::kValidateGameServers;
  if (!answers(route, aw::admission::Outcome::kRewritten) ||
      !answers(validate, aw::admission::Outcome::kAllowed)) {
    return 2;
  }
  const int n = 2000;
  const double handle = PerCall([&] { (void)aw::admission::Handle(route, body, ctx); }, n);
  const double reference =
      PerCall([&] { (void)aw::admission::HandleReference(route, body, ctx); }, n);
  const double vhandle = PerCall([&] { (void)aw::admission::Handle(validate, body, ctx); }, n);
  const double vreference =
      PerCall([&] { (void)aw::admission::HandleReference(validate, body, ctx); }, n);

  // The pipeline writes the decision log line to stderr: to /dev/null here.
  if (std::freopen("/dev/null", "w", stderr) == nullptr) return 2;
  prometheus::Registry registry;
  aw::contract::AtomicCrdReadiness crd(true);
  aw::admission::AdmissionMetrics metrics(registry);
  aw::admission::AdmissionPipeline pipeline(policy, crd, metrics);
  const double serve =
      PerCall([&] { (void)pipeline.Serve(route, "application/json", body, false); }, n);

  std::printf("allocations per request (allocator UPDATE review, %zu bytes; counted: %s):\n",
              body.size(), AW_COUNT_MALLOC ? "every malloc, calloc, realloc" : "operator new");
  std::printf("  admission::Handle (one pass)            %.1f (budget %.0f)\n", handle,
              kBudgetHandle);
  std::printf("  AdmissionPipeline::Serve (+log, metrics) %.1f (budget %.0f)\n", serve,
              kBudgetServe);
  std::printf("  admission::HandleReference (document)   %.1f\n", reference);
  std::printf("  /validate/gameservers: Handle %.1f (budget %.0f), HandleReference %.1f\n", vhandle,
              kBudgetHandle, vreference);
  return handle <= kBudgetHandle && serve <= kBudgetServe && vhandle <= kBudgetHandle ? 0 : 1;
}
