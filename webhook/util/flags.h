// Command-line flags: a table of named flags, each bound to a variable, parsed kubectl-style.
//
// Promise: `--name=value` and `--name value` both work; a bool flag is set by `--name` alone or
// `--name=true|false` (never consumes the next argument); `--help`/`-h` asks for the usage text,
// which lists every flag with its default (the bound variable's value when it was registered) and
// its description, sorted by name. An unknown flag, a missing or malformed value, a value out of
// range or a positional argument is an error naming the flag. Parsing is pure: no output, no exit;
// the caller prints and picks the exit code (by convention 2 for an error).
//
// Components register their own flags next to their config struct, e.g.
//   aw::flags::FlagSet fs("allocating-webhook", "...");
//   fs.Int("port", &cfg.port, "HTTPS port for admission requests", 1, 65535);
//   fs.Duration("default-timeout", &policy.default_timeout, "...");
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aw::flags {

class FlagSet {
 public:
  // Parses `value` into the bound variable; returns an error message, or nullopt on success.
  using Setter = std::function<std::optional<std::string>(std::string_view value)>;

  FlagSet(std::string program, std::string summary);

  // The general form: any type, given its setter and the text shown as default in --help.
  // Registering a name twice is a programming error and throws std::logic_error.
  void Add(std::string name, std::string default_text, std::string help, Setter setter,
           bool is_bool = false);

  void String(std::string name, std::string* dst, std::string help);
  // A string restricted to a set of values (e.g. log levels).
  void Enum(std::string name, std::string* dst, std::vector<std::string> allowed, std::string help);
  void Int(std::string name, int* dst, std::string help, int64_t min = INT32_MIN,
           int64_t max = INT32_MAX);
  void Size(std::string name, size_t* dst, std::string help, uint64_t min = 0,
            uint64_t max = UINT32_MAX);
  void Bool(std::string name, bool* dst, std::string help);
  // Comma-separated list; empty items are dropped; "" clears the list.
  void StringList(std::string name, std::vector<std::string>* dst, std::string help);
  // Go-style duration ("250ms", "1m30s"), via util/duration.h; must be >= min.
  void Duration(std::string name, std::chrono::nanoseconds* dst, std::string help,
                std::chrono::nanoseconds min = std::chrono::nanoseconds(0));

  enum class Status { kOk, kHelp, kError };
  struct Result {
    Status status = Status::kOk;
    std::string message;  // the error, when status == kError
  };
  // argv[0] is the program name and is skipped.
  Result Parse(int argc, const char* const* argv);
  Result Parse(const std::vector<std::string>& args);  // without the program name

  std::string Usage() const;
  // Names of the flags that were given on the command line.
  const std::vector<std::string>& Given() const { return given_; }

 private:
  struct Flag {
    std::string default_text;
    std::string help;
    Setter setter;
    bool is_bool = false;
  };
  std::string program_;
  std::string summary_;
  std::map<std::string, Flag, std::less<>> flags_;
  std::vector<std::string> given_;
};

}  // namespace aw::flags
