// libFuzzer target: any bytes on any admission route. Handle must answer 200 (a JSON
// AdmissionReview echoing a uid) or 400, never crash, hang, leak or answer 500.
//
// Build with clang:  cmake -S . -B build-fuzz -G Ninja -DAW_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++
//                    cmake --build build-fuzz --target admission_fuzz
//                    build-fuzz/admission_fuzz -max_len=65536 test/fixtures/reviews
// With another compiler AW_FUZZ builds the same target with a small driver (standalone_main.cc)
// that replays files, e.g. a corpus or crash reproducers.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "admission/handler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const aw::admission::Policy policy = [] {
    aw::admission::Policy p;
    p.trusted_users = {"system:serviceaccount:allocating-system:allocating-webhook"};
    return p;
  }();
  if (size == 0) return 0;
  // The first byte picks the route and the CRD readiness; the rest is the body.
  const auto& routes = aw::admission::AllRoutes();
  aw::admission::Route route = routes[data[0] % routes.size()];
  bool crd = (data[0] / routes.size()) % 2 == 0;
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  aw::admission::Context ctx{policy, crd, std::chrono::system_clock::time_point{}};
  aw::admission::HandlerResult r = aw::admission::Handle(route, body, ctx);
  if (r.http_status != 200 && r.http_status != 400) std::abort();
  if (r.http_status == 200 && (r.body.empty() || r.body.front() != '{')) std::abort();
  return 0;
}
