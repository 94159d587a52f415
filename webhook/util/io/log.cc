#include "util/io/log.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <mutex>
#include <stdexcept>

#include "util/io/mutex.h"
#include "util/time_format.h"

namespace aw::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::kInfo)};
std::atomic<int> g_format{static_cast<int>(Format::kJson)};
Mutex g_write_mu;  // one record per write: serialises the writes to stderr (guards no field)

std::string_view LevelName(Level l) {
  switch (l) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warn";
    case Level::kError:
      return "error";
  }
  return "info";
}

// True for the bytes a JSON string cannot hold as they are: '"', '\\' and the controls.
constexpr bool NeedsEscape(unsigned char c) { return c == '"' || c == '\\' || c < 0x20; }

void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  size_t run = 0;  // start of the bytes not yet appended (appended as one run, not byte by byte)
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (!NeedsEscape(c)) continue;
    out->append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default: {
        static constexpr char kHex[] = "0123456789abcdef";
        const char u[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
        out->append(u, sizeof u);
      }
    }
  }
  out->append(s.data() + run, s.size() - run);
  out->push_back('"');
}

void AppendTextValue(std::string* out, std::string_view s) {
  bool quote = s.empty() || s.find_first_of(" \"=\t\n") != std::string_view::npos;
  if (!quote) {
    out->append(s);
    return;
  }
  AppendJsonString(out, s);
}

std::string_view Timestamp(util::Rfc3339Buffer* buf) {
  return util::FormatRfc3339To(std::chrono::system_clock::now(), util::Rfc3339Precision::kMicros,
                               buf);
}

}  // namespace

bool ParseLevel(std::string_view s, Level* out) {
  if (s == "debug")
    *out = Level::kDebug;
  else if (s == "info")
    *out = Level::kInfo;
  else if (s == "warn")
    *out = Level::kWarn;
  else if (s == "error")
    *out = Level::kError;
  else
    return false;
  return true;
}

bool ParseFormat(std::string_view s, Format* out) {
  if (s == "json")
    *out = Format::kJson;
  else if (s == "text")
    *out = Format::kText;
  else
    return false;
  return true;
}

void SetLevel(Level level) { g_level.store(static_cast<int>(level)); }
void SetFormat(Format format) { g_format.store(static_cast<int>(format)); }
bool Enabled(Level level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

namespace {

void AppendRecord(std::string& out, Format format, Level level, std::string_view msg,
                  const Fields& fields) {
  out.reserve(out.size() + 128 + msg.size());
  util::Rfc3339Buffer ts;
  if (format == Format::kJson) {
    out.append("{\"ts\":");
    AppendJsonString(&out, Timestamp(&ts));
    out.append(",\"level\":");
    AppendJsonString(&out, LevelName(level));
    out.append(",\"msg\":");
    AppendJsonString(&out, msg);
    for (const auto& [k, v] : fields) {
      out.push_back(',');
      AppendJsonString(&out, k);
      out.push_back(':');
      AppendJsonString(&out, v);
    }
    out.push_back('}');
  } else {
    out.append(Timestamp(&ts));
    out.push_back(' ');
    out.append(LevelName(level));
    out.push_back(' ');
    AppendTextValue(&out, msg);
    for (const auto& [k, v] : fields) {
      out.push_back(' ');
      out.append(k);
      out.push_back('=');
      AppendTextValue(&out, v);
    }
  }
  out.push_back('\n');
}

// The line being written, per thread (a record's line is not allocated again for the next one);
// one grown past kMaxKeptLineBytes is not kept.
thread_local std::string tls_line;
constexpr size_t kMaxKeptLineBytes = 64 * 1024;

// Pending bytes past this are written at once, not at the scheduled flush.
constexpr size_t kDeferredFlushBytes = 16 * 1024;

}  // namespace

// The records an event loop's thread has written but not yet flushed.
struct DeferredWrites::Pending {
  std::string bytes;
  std::function<void()> schedule;
  bool scheduled = false;  // a Flush is on its way (schedule() was called for this batch)
};

namespace {

using Pending = DeferredWrites::Pending;
thread_local Pending* tls_pending = nullptr;

void WriteOut(std::string_view bytes) {
  MutexLock lock(g_write_mu);
  std::fwrite(bytes.data(), 1, bytes.size(), stderr);
  std::fflush(stderr);
}

void FlushPending(Pending& p) {
  p.scheduled = false;
  if (p.bytes.empty()) return;
  WriteOut(p.bytes);
  p.bytes.clear();
  if (p.bytes.capacity() > kMaxKeptLineBytes) std::string().swap(p.bytes);
}

}  // namespace

std::string FormatRecord(Format format, Level level, std::string_view msg, const Fields& fields) {
  std::string out;
  AppendRecord(out, format, level, msg, fields);
  return out;
}

void Write(Level level, std::string_view msg, const Fields& fields) {
  if (!Enabled(level)) return;
  const auto format = static_cast<Format>(g_format.load(std::memory_order_relaxed));
  if (Pending* p = tls_pending) {
    if (level <= Level::kInfo) {
      AppendRecord(p->bytes, format, level, msg, fields);
      if (p->bytes.size() >= kDeferredFlushBytes) {
        FlushPending(*p);
      } else if (!p->scheduled) {
        p->scheduled = true;
        p->schedule();
      }
      return;
    }
    FlushPending(*p);  // this thread's earlier records come first
  }
  std::string& line = tls_line;
  line.clear();
  AppendRecord(line, format, level, msg, fields);
  WriteOut(line);
  if (line.capacity() > kMaxKeptLineBytes) std::string().swap(line);
}

DeferredWrites::DeferredWrites(std::function<void()> schedule)
    : pending_(std::make_unique<Pending>()) {
  if (tls_pending != nullptr) throw std::logic_error("log::DeferredWrites: one per thread");
  pending_->schedule = std::move(schedule);
  tls_pending = pending_.get();
}

DeferredWrites::~DeferredWrites() {
  tls_pending = nullptr;
  FlushPending(*pending_);
}

void DeferredWrites::Flush() {
  if (Pending* p = tls_pending) FlushPending(*p);
}

void RegisterFlags(flags::FlagSet& fs, Flags* f) {
  fs.Enum("log-level", &f->level, {"debug", "info", "warn", "error"}, "Lowest log level written");
  fs.Enum("log-format", &f->format, {"json", "text"}, "Log line format");
}

void Apply(const Flags& f) {
  Level level = Level::kInfo;
  Format format = Format::kJson;
  ParseLevel(f.level, &level);
  ParseFormat(f.format, &format);
  SetLevel(level);
  SetFormat(format);
}

}  // namespace aw::log
