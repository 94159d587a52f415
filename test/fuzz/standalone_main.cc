// Replays inputs through LLVMFuzzerTestOneInput when the compiler has no libFuzzer (gcc):
//   admission_fuzz FILE...   each file is one input; directories are not walked.
// Each fixture is also tried on every route (first byte 0..9 prepended).
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  int n = 0;
  for (int i = 1; i < argc; ++i) {
    std::ifstream f(argv[i], std::ios::binary);
    if (!f) {
      std::fprintf(stderr, "cannot read %s\n", argv[i]);
      return 2;
    }
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    for (uint8_t b = 0; b < 10; ++b) {
      std::string with = std::string(1, static_cast<char>(b)) + bytes;
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(with.data()), with.size());
      ++n;
    }
  }
  std::printf("%d inputs replayed\n", n);
  return 0;
}
