#include "util/status.h"

namespace aw {

std::string_view CodeName(Status::Code code) {
  switch (code) {
    case Status::Code::kOk:
      return "OK";
    case Status::Code::kInvalidArgument:
      return "invalid argument";
    case Status::Code::kNotFound:
      return "not found";
    case Status::Code::kConflict:
      return "conflict";
    case Status::Code::kUnavailable:
      return "unavailable";
    case Status::Code::kDeadlineExceeded:
      return "deadline exceeded";
    case Status::Code::kCancelled:
      return "cancelled";
    case Status::Code::kIOError:
      return "I/O error";
    case Status::Code::kInternal:
      return "internal error";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s(CodeName(code_));
  s += ": ";
  s += message_;
  return s;
}

Status Status::Annotate(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m));
}

}  // namespace aw
