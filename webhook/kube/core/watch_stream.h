// Framing and parsing of the Kubernetes watch stream (newline-delimited JSON events).
//
// Promise: LineFramer turns arbitrary chunks into complete lines, whatever the chunk boundaries
// (an event split across many chunks, many events in one chunk, CRLF), and refuses lines over a
// size limit instead of growing without bound. ParseWatchEvent turns one line into a WatchEvent;
// an ERROR event carries the API server's Status as an ApiError (410 Expired => IsExpired()).
// Pure: no I/O.
#pragma once

#include <rapidjson/document.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kube/core/status.h"
#include "util/status.h"

namespace aw::kube {

using JsonPtr = std::shared_ptr<rapidjson::Document>;

// A standalone copy of `value` whose memory pool grows in chunks of about `chunk_bytes` (clamped
// to 1-64 KiB) instead of rapidjson's default 64 KiB first chunk: a cache holding thousands of
// objects, each replaced at every change, keeps only what they need.
JsonPtr CopyToDocument(const rapidjson::Value& value, size_t chunk_bytes);

class LineFramer {
 public:
  explicit LineFramer(size_t max_line = 32 * 1024 * 1024) : max_line_(max_line) {}
  // Emits each complete, non-blank line (without the terminator). Returns false once a line
  // exceeds the limit (the framer then stays failed).
  bool Feed(std::string_view chunk, const std::function<void(std::string_view)>& emit);
  // The same, except that a line over the limit is dropped up to its end (on_oversized runs once
  // for it) and framing goes on with the next line: never fails.
  void FeedSkipping(std::string_view chunk, const std::function<void(std::string_view)>& emit,
                    const std::function<void()>& on_oversized);
  size_t buffered() const { return buf_.size(); }
  bool failed() const { return failed_; }

 private:
  static void EmitLine(std::string_view line, const std::function<void(std::string_view)>& emit);
  size_t max_line_;
  std::string buf_;
  bool failed_ = false;
  bool discarding_ = false;  // FeedSkipping: inside an oversized line
};

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark, kError };
  Type type = Type::kError;
  JsonPtr object;  // the event's "object" (a standalone document); null for kError and raw events
  std::string_view object_json;  // raw watches (WatchOptions::raw): the object's text
  ApiError error;                // for kError: the Status carried by the event
};

std::string_view WatchEventTypeName(WatchEvent::Type t);
// The inverse: the type a watch event's "type" names, std::nullopt for an unknown name.
std::optional<WatchEvent::Type> WatchEventTypeOf(std::string_view name);

// Parses one line; InvalidArgument saying what is wrong for malformed input.
StatusOr<WatchEvent> ParseWatchEvent(std::string_view line);

// metadata.resourceVersion / name / namespace / uid of an object ("" if absent).
std::string MetaString(const rapidjson::Value& obj, const char* field);

}  // namespace aw::kube
