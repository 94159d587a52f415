#include "util/base64.h"

#include <cstdint>

namespace aw::util {
namespace {
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}
}  // namespace

void Base64AppendTo(std::string_view in, std::string* out) {
  // Sized once, then written through a pointer.
  const size_t start = out->size();
  out->resize(start + (in.size() + 2) / 3 * 4);
  char* p = out->data() + start;
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    uint32_t v = (uint32_t(uint8_t(in[i])) << 16) | (uint32_t(uint8_t(in[i + 1])) << 8) |
                 uint32_t(uint8_t(in[i + 2]));
    *p++ = kAlphabet[(v >> 18) & 63];
    *p++ = kAlphabet[(v >> 12) & 63];
    *p++ = kAlphabet[(v >> 6) & 63];
    *p++ = kAlphabet[v & 63];
  }
  size_t rest = in.size() - i;
  if (rest == 1) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16;
    *p++ = kAlphabet[(v >> 18) & 63];
    *p++ = kAlphabet[(v >> 12) & 63];
    *p++ = '=';
    *p++ = '=';
  } else if (rest == 2) {
    uint32_t v = (uint32_t(uint8_t(in[i])) << 16) | (uint32_t(uint8_t(in[i + 1])) << 8);
    *p++ = kAlphabet[(v >> 18) & 63];
    *p++ = kAlphabet[(v >> 12) & 63];
    *p++ = kAlphabet[(v >> 6) & 63];
    *p++ = '=';
  }
}

std::string Base64Encode(std::string_view in) {
  std::string out;
  Base64AppendTo(in, &out);
  return out;
}

std::optional<std::string> Base64Decode(std::string_view in) {
  if (in.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    int a = Value(in[i]), b = Value(in[i + 1]);
    if (a < 0 || b < 0) return std::nullopt;
    bool last = i + 4 == in.size();
    int c = in[i + 2] == '=' && last ? -2 : Value(in[i + 2]);
    int d = in[i + 3] == '=' && last ? -2 : Value(in[i + 3]);
    if (c == -1 || d == -1 || (c == -2 && d != -2)) return std::nullopt;
    uint32_t v = (uint32_t(a) << 18) | (uint32_t(b) << 12) | (uint32_t(c < 0 ? 0 : c) << 6) |
                 uint32_t(d < 0 ? 0 : d);
    out += char((v >> 16) & 0xff);
    if (c >= 0) out += char((v >> 8) & 0xff);
    if (d >= 0) out += char(v & 0xff);
  }
  return out;
}

std::optional<std::string> Base64DecodeText(std::string_view in) {
  std::string clean;
  clean.reserve(in.size());
  for (char c : in) {
    if (c != '\n' && c != '\r' && c != ' ' && c != '\t') clean.push_back(c);
  }
  return Base64Decode(clean);
}

}  // namespace aw::util
