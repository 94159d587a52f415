#include "autoscale/buffer.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "util/text.h"

namespace aw::autoscale {
namespace {

constexpr std::string_view kKnown = "bufferSize, minReplicas, maxReplicas";

// fmt, not `"literal" + std::string&&`: gcc 12 at -O3 reports a false -Wrestrict for the latter.
std::string Quote(std::string_view v) { return fmt::format("\"{}\"", util::Clip(v, 40)); }

// A decimal integer with an optional leading '-', within int32. nullopt otherwise.
std::optional<int32_t> ParseInt32(std::string_view s) {
  bool negative = false;
  if (!s.empty() && s[0] == '-') {
    negative = true;
    s.remove_prefix(1);
  }
  if (s.empty() || s.size() > 10) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (negative) v = -v;
  if (v < INT32_MIN || v > INT32_MAX) return std::nullopt;
  return static_cast<int32_t>(v);
}

Status BadInt(std::string_view name, std::string_view value) {
  return Status::InvalidArgument(
      fmt::format("parameter {} is {}: expected a decimal integer (int32)", name, Quote(value)));
}

}  // namespace

std::string BufferSizeText(const BufferPolicy& p) {
  return p.percent ? fmt::format("{}%", p.buffer_size) : fmt::format("{}", p.buffer_size);
}

Status ParseBufferParams(const std::vector<Param>& params, BufferPolicy* out) {
  BufferPolicy p;
  bool have_size = false, have_min = false, have_max = false;
  for (const auto& [name, value] : params) {
    bool* seen = nullptr;
    if (name == "bufferSize") {
      seen = &have_size;
    } else if (name == "minReplicas") {
      seen = &have_min;
    } else if (name == "maxReplicas") {
      seen = &have_max;
    } else {
      return Status::InvalidArgument(
          fmt::format("unknown parameter {}: the Buffer policy takes {}", Quote(name), kKnown));
    }
    if (*seen) {
      return Status::InvalidArgument(fmt::format("parameter {} is given more than once", name));
    }
    *seen = true;
    if (name == "bufferSize") {
      std::string_view v = value;
      if (!v.empty() && v.back() == '%') {
        v.remove_suffix(1);
        p.percent = true;
      }
      auto n = ParseInt32(v);
      if (!n) {
        return Status::InvalidArgument(fmt::format(
            "parameter bufferSize is {}: expected an integer (e.g. 5) or a percentage (e.g. 20%)",
            Quote(value)));
      }
      p.buffer_size = *n;
    } else {
      auto n = ParseInt32(value);
      if (!n) return BadInt(name, value);
      (name == "minReplicas" ? p.min_replicas : p.max_replicas) = *n;
    }
  }
  if (!have_size) {
    return Status::InvalidArgument(
        "parameter bufferSize is missing (e.g. /autoscale/buffer/bufferSize=5/maxReplicas=100)");
  }
  if (!have_max) {
    return Status::InvalidArgument(
        "parameter maxReplicas is missing (e.g. /autoscale/buffer/bufferSize=5/maxReplicas=100)");
  }
  if (Status s = ValidateBufferPolicy(p); !s.ok()) return s;
  *out = p;
  return Status::Ok();
}

Status ValidateBufferPolicy(const BufferPolicy& p) {
  if (p.min_replicas < 0) {
    return Status::InvalidArgument(
        fmt::format("minReplicas is {}: it must be at least 0", p.min_replicas));
  }
  if (p.min_replicas > p.max_replicas) {
    return Status::InvalidArgument(
        fmt::format("minReplicas ({}) must not be bigger than maxReplicas ({})", p.min_replicas,
                    p.max_replicas));
  }
  if (!p.percent) {
    if (p.buffer_size <= 0) {
      return Status::InvalidArgument(
          fmt::format("bufferSize is {}: it must be bigger than 0", p.buffer_size));
    }
    if (p.max_replicas < p.buffer_size) {
      return Status::InvalidArgument(
          fmt::format("maxReplicas ({}) must be bigger than or equal to bufferSize ({})",
                      p.max_replicas, p.buffer_size));
    }
    if (p.min_replicas != 0 && p.min_replicas < p.buffer_size) {
      return Status::InvalidArgument(
          fmt::format("minReplicas ({}) must be 0 or bigger than or equal to bufferSize ({})",
                      p.min_replicas, p.buffer_size));
    }
  } else {
    if (p.buffer_size < 1 || p.buffer_size > 99) {
      return Status::InvalidArgument(
          fmt::format("bufferSize is {}%: it must be between 1% and 99%", p.buffer_size));
    }
    if (p.min_replicas < 1) {
      return Status::InvalidArgument(fmt::format(
          "minReplicas is {}: with a percentage bufferSize it must be at least 1 (an empty fleet "
          "would otherwise never grow)",
          p.min_replicas));
    }
  }
  return Status::Ok();
}

BufferResult ApplyBuffer(const BufferPolicy& p, int64_t allocated) {
  allocated = std::max<int64_t>(allocated, 0);
  int64_t replicas = 0;
  if (!p.percent) {
    replicas = allocated + p.buffer_size;
  } else {
    // ceil(allocated * 100 / (100 - percent)), in integers.
    const int64_t den = 100 - p.buffer_size;
    replicas = (allocated * 100 + den - 1) / den;
  }
  BufferResult r;
  if (replicas < p.min_replicas) {
    replicas = p.min_replicas;
    r.limited = true;
  }
  if (replicas > p.max_replicas) {
    replicas = p.max_replicas;
    r.limited = true;
  }
  r.replicas = static_cast<int32_t>(replicas);
  return r;
}

}  // namespace aw::autoscale
