#include "util/io/file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace aw::util {

StatusOr<std::string> ReadFile(const std::string& path) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return Status::IOError(
        fmt::format("cannot read {}: {}", path, err != 0 ? std::strerror(err) : "cannot open"));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::IOError(fmt::format("cannot read {}: read error", path));
  return ss.str();
}

}  // namespace aw::util
