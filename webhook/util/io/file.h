// Reading a whole (small) file: the one file reader of the I/O library.
//
// Promise: ReadFile(path) returns the file's bytes, or IOError "cannot read <path>: <reason>"
// (the reason from errno: "No such file or directory", "Permission denied", ...). Never throws.
#pragma once

#include <string>

#include "util/status.h"

namespace aw::util {

StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace aw::util
