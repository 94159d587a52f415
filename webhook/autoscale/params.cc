#include "autoscale/params.h"

#include <fmt/format.h>

#include "util/text.h"

namespace aw::autoscale {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// fmt, not `"literal" + std::string&&`: gcc 12 at -O3 reports a false -Wrestrict for the latter.
std::string Quote(std::string_view v) { return fmt::format("\"{}\"", util::Clip(v, 60)); }

// Appends `name=value` (already decoded) from `item`; empty items are skipped.
Status AddPair(std::string_view item, std::string_view where, std::vector<Param>* out) {
  if (item.empty()) return Status::Ok();
  const size_t eq = item.find('=');
  if (eq == std::string_view::npos) {
    return Status::InvalidArgument(
        fmt::format("{} {} is not name=value (e.g. bufferSize=5)", where, Quote(item)));
  }
  if (eq == 0) {
    return Status::InvalidArgument(fmt::format("{} {} has an empty name", where, Quote(item)));
  }
  out->emplace_back(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
  return Status::Ok();
}

Status AddQuery(std::string_view query, std::vector<Param>* out) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    std::string decoded = eq == std::string_view::npos ? PercentDecode(item)
                                                       : PercentDecode(item.substr(0, eq)) + "=" +
                                                             PercentDecode(item.substr(eq + 1));
    if (Status s = AddPair(decoded, "query parameter", out); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace

std::string PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      const int hi = HexValue(s[i + 1]), lo = HexValue(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

Status SplitParams(std::string_view prefix, std::string_view path, std::string_view query,
                   std::vector<Param>* out) {
  out->clear();
  // Undo the sender's escaping of the path once; an escaped '?' then starts a query.
  const std::string decoded = PercentDecode(path);
  std::string_view p = decoded;
  std::string_view escaped_query;
  if (const size_t q = p.find('?'); q != std::string_view::npos) {
    escaped_query = p.substr(q + 1);
    p = p.substr(0, q);
  }
  if (p.substr(0, prefix.size()) != prefix ||
      (p.size() > prefix.size() && p[prefix.size()] != '/')) {
    return Status::InvalidArgument(fmt::format("path {} is not under {}", Quote(p), Quote(prefix)));
  }
  std::string_view rest = p.substr(prefix.size());
  while (!rest.empty()) {
    const size_t slash = rest.find('/');
    std::string_view seg = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (Status s = AddPair(seg, "path segment", out); !s.ok()) return s;
  }
  if (Status s = AddQuery(escaped_query, out); !s.ok()) return s;
  return AddQuery(query, out);
}

}  // namespace aw::autoscale
