#include "util/io/log.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

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

void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  for (unsigned char c : s) {
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
      default:
        if (c < 0x20) {
          out->append(fmt::format("\\u{:04x}", c));
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
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

std::string Timestamp() {
  return util::FormatRfc3339(std::chrono::system_clock::now(), util::Rfc3339Precision::kMicros);
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
  out.reserve(128 + msg.size());
  if (format == Format::kJson) {
    out.append("{\"ts\":");
    AppendJsonString(&out, Timestamp());
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
    out.append(Timestamp());
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

}  // namespace

std::string FormatRecord(Format format, Level level, std::string_view msg, const Fields& fields) {
  std::string out;
  AppendRecord(out, format, level, msg, fields);
  return out;
}

void Write(Level level, std::string_view msg, const Fields& fields) {
  if (!Enabled(level)) return;
  std::string& line = tls_line;
  line.clear();
  AppendRecord(line, static_cast<Format>(g_format.load(std::memory_order_relaxed)), level, msg,
               fields);
  {
    MutexLock lock(g_write_mu);
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  }
  if (line.capacity() > kMaxKeptLineBytes) std::string().swap(line);
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
