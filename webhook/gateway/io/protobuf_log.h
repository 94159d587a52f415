// libprotobuf's own log lines, routed through the project's log (aw::log).
//
// Promise:
//   - after InstallProtobufLogHandler(), libprotobuf writes nothing to stderr by itself: each line
//   it
//     logs (for example "String field 'allocation.AllocationRequest.namespace' contains invalid
//     UTF-8 data ..." for a malformed gRPC request) becomes one structured record at debug level
//     with the fields library=protobuf, severity, file and line; at most kProtobufLinesPerSecond
//     such records per second over the whole process, the ones over the limit dropped and counted
//     in the next record's `dropped` field, so a client cannot flood the log. A FATAL line is
//     logged at error level and never dropped (libprotobuf aborts after it).
//   - InstallProtobufLogHandler() is idempotent and may be called from any thread; call it at
//     start, before libprotobuf is used.
//   - ProtobufLogCapture: while one is alive on a thread, what libprotobuf logs on that thread is
//     also kept in it (captures nest: the innermost gets the lines). It lets a caller say why a
//     parse failed (InvalidUtf8()) in its answer instead of a bare "does not decode".
#pragma once

#include <string>

namespace aw::gateway {

inline constexpr int kProtobufLinesPerSecond = 5;

void InstallProtobufLogHandler();

class ProtobufLogCapture {
 public:
  ProtobufLogCapture();
  ~ProtobufLogCapture();
  ProtobufLogCapture(const ProtobufLogCapture&) = delete;
  ProtobufLogCapture& operator=(const ProtobufLogCapture&) = delete;

  // The lines libprotobuf logged on this thread since construction, joined by "; ".
  const std::string& text() const { return text_; }
  // Whether one of them said a string field held invalid UTF-8.
  bool InvalidUtf8() const;

  void Add(const std::string& line);

 private:
  ProtobufLogCapture* outer_;
  std::string text_;
};

}  // namespace aw::gateway
