#include "util/flags.h"

#include <fmt/format.h>

#include <charconv>
#include <stdexcept>
#include <utility>

#include "util/duration.h"

namespace aw::flags {
namespace {

// Go's strconv.ParseBool spellings, as kubectl accepts them.
std::optional<bool> ParseBoolValue(std::string_view v) {
  if (v == "1" || v == "t" || v == "T" || v == "true" || v == "TRUE" || v == "True") return true;
  if (v == "0" || v == "f" || v == "F" || v == "false" || v == "FALSE" || v == "False") {
    return false;
  }
  return std::nullopt;
}

template <typename T>
std::optional<T> ParseNumber(std::string_view v) {
  T out{};
  if (v.empty()) return std::nullopt;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || ptr != v.data() + v.size()) return std::nullopt;
  return out;
}

std::string JoinList(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out.push_back(',');
    out += s;
  }
  return out;
}

}  // namespace

FlagSet::FlagSet(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

void FlagSet::Add(std::string name, std::string default_text, std::string help, Setter setter,
                  bool is_bool) {
  if (name.empty() || name.starts_with("-") || name.find('=') != std::string::npos) {
    throw std::logic_error("invalid flag name: " + name);
  }
  if (name == "help" || flags_.contains(name)) {
    throw std::logic_error("flag registered twice: --" + name);
  }
  flags_.emplace(std::move(name),
                 Flag{std::move(default_text), std::move(help), std::move(setter), is_bool});
}

void FlagSet::String(std::string name, std::string* dst, std::string help) {
  Add(std::move(name), *dst, std::move(help),
      [dst](std::string_view v) -> std::optional<std::string> {
        *dst = std::string(v);
        return std::nullopt;
      });
}

void FlagSet::Enum(std::string name, std::string* dst, std::vector<std::string> allowed,
                   std::string help) {
  std::string joined;
  for (const auto& a : allowed) joined += (joined.empty() ? "" : "|") + a;
  help += " (" + joined + ")";
  Add(std::move(name), *dst, std::move(help),
      [dst, allowed = std::move(allowed),
       joined](std::string_view v) -> std::optional<std::string> {
        for (const auto& a : allowed) {
          if (a == v) {
            *dst = a;
            return std::nullopt;
          }
        }
        return "must be one of " + joined;
      });
}

void FlagSet::Int(std::string name, int* dst, std::string help, int64_t min, int64_t max) {
  Add(std::move(name), std::to_string(*dst), std::move(help),
      [dst, min, max](std::string_view v) -> std::optional<std::string> {
        auto n = ParseNumber<int64_t>(v);
        if (!n) return "not an integer";
        if (*n < min || *n > max) return fmt::format("must be between {} and {}", min, max);
        *dst = static_cast<int>(*n);
        return std::nullopt;
      });
}

void FlagSet::Size(std::string name, size_t* dst, std::string help, uint64_t min, uint64_t max) {
  Add(std::move(name), std::to_string(*dst), std::move(help),
      [dst, min, max](std::string_view v) -> std::optional<std::string> {
        auto n = ParseNumber<uint64_t>(v);
        if (!n) return "not a non-negative integer";
        if (*n < min || *n > max) return fmt::format("must be between {} and {}", min, max);
        *dst = static_cast<size_t>(*n);
        return std::nullopt;
      });
}

void FlagSet::Bool(std::string name, bool* dst, std::string help) {
  Add(
      std::move(name), *dst ? "true" : "false", std::move(help),
      [dst](std::string_view v) -> std::optional<std::string> {
        auto b = ParseBoolValue(v);
        if (!b) return "not a boolean (true|false)";
        *dst = *b;
        return std::nullopt;
      },
      /*is_bool=*/true);
}

void FlagSet::StringList(std::string name, std::vector<std::string>* dst, std::string help) {
  Add(std::move(name), JoinList(*dst), std::move(help),
      [dst](std::string_view v) -> std::optional<std::string> {
        std::vector<std::string> items;
        size_t start = 0;
        while (start <= v.size()) {
          size_t comma = v.find(',', start);
          if (comma == std::string_view::npos) comma = v.size();
          std::string_view item = v.substr(start, comma - start);
          while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
          while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
          if (!item.empty()) items.emplace_back(item);
          start = comma + 1;
        }
        *dst = std::move(items);
        return std::nullopt;
      });
}

void FlagSet::Duration(std::string name, std::chrono::nanoseconds* dst, std::string help,
                       std::chrono::nanoseconds min) {
  Add(std::move(name), aw::util::FormatDuration(*dst), std::move(help),
      [dst, min](std::string_view v) -> std::optional<std::string> {
        StatusOr<std::chrono::nanoseconds> d = aw::util::ParseDuration(v);
        if (!d) return "not a duration (e.g. 250ms, 30s, 1m30s): " + d.status().message();
        if (*d < min) return "must be at least " + aw::util::FormatDuration(min);
        *dst = *d;
        return std::nullopt;
      });
}

FlagSet::Result FlagSet::Parse(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return Parse(args);
}

FlagSet::Result FlagSet::Parse(const std::vector<std::string>& args) {
  auto error = [](std::string msg) { return Result{Status::kError, std::move(msg)}; };
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h" || arg == "-help") return Result{Status::kHelp, ""};
    if (!arg.starts_with("-") || arg == "-" || arg == "--") {
      return error(fmt::format("unexpected argument \"{}\" (flags start with --)", arg));
    }
    arg.remove_prefix(arg.starts_with("--") ? 2 : 1);
    std::string_view name = arg;
    std::optional<std::string_view> value;
    if (auto eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    auto it = flags_.find(name);
    if (it == flags_.end()) return error(fmt::format("unknown flag: --{}", name));
    const Flag& flag = it->second;
    if (!value) {
      if (flag.is_bool) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return error(fmt::format("flag needs an argument: --{}", name));
      }
    }
    if (auto err = flag.setter(*value)) {
      return error(fmt::format("invalid value \"{}\" for flag --{}: {}", *value, name, *err));
    }
    given_.emplace_back(name);
  }
  return Result{};
}

std::string FlagSet::Usage() const {
  std::string out = fmt::format("{}\n\nUsage:\n  {} [flags]\n\nFlags:\n", summary_, program_);
  for (const auto& [name, flag] : flags_) {
    std::string def = flag.default_text.empty() ? "\"\"" : flag.default_text;
    out += fmt::format("  --{}\n      {} (default {})\n", name, flag.help, def);
  }
  out += "  --help\n      Print this help and exit\n";
  return out;
}

}  // namespace aw::flags
