// Structured logging.
//
// Promise: one line per record on stderr, either JSON (default) or "key=value" text, with a
// timestamp, level, message and any number of string fields. Thread-safe: records from different
// threads never interleave within a line. Records below the configured level cost one atomic load.
//
//   aw::log::info("admission decision", {{"uid", uid}, {"decision", "rewritten"}});
//
// Deferred writing (log::DeferredWrites) lets an event loop's thread write the records of one round
// of its handlers with one write instead of one each.
//
// Both programs take --log-level and --log-format from RegisterFlags and Apply them once parsed.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
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

// Deferred writing on an event loop's thread. While one is alive on a thread, the info and debug
// records that thread writes are appended to the thread's pending bytes instead of written at once;
// the first record of a batch calls `schedule`, which must make Flush() run later on this same
// thread (the admission io threads post it to their own io_context: it runs after the handlers
// already queued, so one round of requests costs one write). Pending bytes are written, in order
// and with whole lines only, by that Flush, at once when they pass 16 KiB, before a warn or error
// record of the same thread (which is never deferred), and by the destructor: no record is lost
// when the loop stops. Records of other threads may reach stderr between a deferred record and
// its flush (each line keeps its own timestamp). One per thread (a second throws
// std::logic_error); construct and destroy it on the thread it serves.
class DeferredWrites {
 public:
  explicit DeferredWrites(std::function<void()> schedule);
  ~DeferredWrites();
  DeferredWrites(const DeferredWrites&) = delete;
  DeferredWrites& operator=(const DeferredWrites&) = delete;

  // Writes the calling thread's pending records, if it has a DeferredWrites; else nothing.
  static void Flush();

  struct Pending;

 private:
  std::unique_ptr<Pending> pending_;
};

}  // namespace aw::log
