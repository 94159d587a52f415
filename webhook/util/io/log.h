// Structured logging.
//
// Promise: one line per record on stderr, either JSON (default) or "key=value" text, with a
// timestamp, level, message and any number of string fields. Thread-safe: records from different
// threads never interleave within a line. Records below the configured level cost one atomic load.
//
//   aw::log::info("admission decision", {{"uid", uid}, {"decision", "rewritten"}});
//
// Both programs take --log-level and --log-format from RegisterFlags and Apply them once parsed.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/flags.h"

namespace aw::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
enum class Format { kJson, kText };

using Field = std::pair<std::string_view, std::string>;
using Fields = std::vector<Field>;

// Parses "debug|info|warn|error"; returns false on anything else.
bool ParseLevel(std::string_view s, Level* out);
// Parses "json|text"; returns false on anything else.
bool ParseFormat(std::string_view s, Format* out);

void SetLevel(Level level);
void SetFormat(Format format);

// The log's flags (--log-level, --log-format), each defaulting to the struct's value.
struct Flags {
  std::string level = "info";
  std::string format = "json";
};
void RegisterFlags(flags::FlagSet& fs, Flags* f);
// Sets the level and format the flags name (values the flag parser has checked).
void Apply(const Flags& f);
bool Enabled(Level level);

// Formats one record without writing it (exposed for tests).
std::string FormatRecord(Format format, Level level, std::string_view msg, const Fields& fields);

void Write(Level level, std::string_view msg, const Fields& fields = {});
inline void debug(std::string_view msg, const Fields& f = {}) { Write(Level::kDebug, msg, f); }
inline void info(std::string_view msg, const Fields& f = {}) { Write(Level::kInfo, msg, f); }
inline void warn(std::string_view msg, const Fields& f = {}) { Write(Level::kWarn, msg, f); }
inline void error(std::string_view msg, const Fields& f = {}) { Write(Level::kError, msg, f); }

}  // namespace aw::log
