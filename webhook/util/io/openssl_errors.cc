#include "util/io/openssl_errors.h"

#include <openssl/err.h>

namespace aw::util {

std::string OpenSslErrors(std::string_view if_empty) {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? std::string(if_empty) : out;
}

}  // namespace aw::util
