#include "gateway/io/protobuf_log.h"

#include <google/protobuf/stubs/logging.h>

#include <chrono>
#include <mutex>
#include <string_view>

#include "util/io/log.h"
#include "util/io/mutex.h"

namespace aw::gateway {
namespace {

thread_local ProtobufLogCapture* t_capture = nullptr;

// The records of one one-second window and the lines dropped since the last record written.
struct Limiter {
  Mutex mu;
  std::chrono::steady_clock::time_point window GUARDED_BY(mu);
  int in_window GUARDED_BY(mu) = 0;
  long dropped GUARDED_BY(mu) = 0;
};

Limiter& TheLimiter() {
  static Limiter l;
  return l;
}

std::string_view SeverityName(google::protobuf::LogLevel level) {
  switch (level) {
    case google::protobuf::LOGLEVEL_INFO:
      return "info";
    case google::protobuf::LOGLEVEL_WARNING:
      return "warning";
    case google::protobuf::LOGLEVEL_ERROR:
      return "error";
    case google::protobuf::LOGLEVEL_FATAL:
      return "fatal";
  }
  return "unknown";
}

void Handle(google::protobuf::LogLevel level, const char* filename, int line,
            const std::string& message) {
  if (t_capture != nullptr) t_capture->Add(message);
  log::Fields fields{{"library", "protobuf"},
                     {"severity", std::string(SeverityName(level))},
                     {"file", filename ? filename : ""},
                     {"line", std::to_string(line)}};
  if (level == google::protobuf::LOGLEVEL_FATAL) {
    log::error(message, fields);
    return;
  }
  Limiter& l = TheLimiter();
  long dropped = 0;
  {
    MutexLock lock(l.mu);
    const auto now = std::chrono::steady_clock::now();
    if (now - l.window >= std::chrono::seconds(1)) {
      l.window = now;
      l.in_window = 0;
    }
    if (l.in_window >= kProtobufLinesPerSecond) {
      ++l.dropped;
      return;
    }
    ++l.in_window;
    dropped = l.dropped;
    l.dropped = 0;
  }
  if (dropped > 0) fields.emplace_back("dropped", std::to_string(dropped));
  log::debug(message, fields);
}

}  // namespace

void InstallProtobufLogHandler() {
  static std::once_flag once;
  std::call_once(once, [] { google::protobuf::SetLogHandler(&Handle); });
}

ProtobufLogCapture::ProtobufLogCapture() : outer_(t_capture) { t_capture = this; }

ProtobufLogCapture::~ProtobufLogCapture() { t_capture = outer_; }

void ProtobufLogCapture::Add(const std::string& line) {
  if (!text_.empty()) text_ += "; ";
  text_ += line;
}

bool ProtobufLogCapture::InvalidUtf8() const {
  return text_.find("invalid UTF-8") != std::string::npos;
}

}  // namespace aw::gateway
