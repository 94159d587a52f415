#include "util/url.h"

namespace aw::util {

StatusOr<HttpUrl> ParseHttpUrl(std::string_view url) {
  HttpUrl out;
  std::string_view rest = url;
  if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
    out.https = false;
    out.port = 80;
  } else {
    return Status::InvalidArgument("must start with http:// or https://");
  }
  const size_t slash = rest.find('/');
  std::string_view hostport = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  std::string_view port_text;
  if (hostport.starts_with("[")) {
    const size_t close = hostport.find(']');
    if (close == std::string_view::npos) return Status::InvalidArgument("bad IPv6 literal");
    out.host = std::string(hostport.substr(1, close - 1));
    std::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return Status::InvalidArgument("bad port");
      port_text = after.substr(1);
    }
  } else {
    const size_t colon = hostport.rfind(':');
    out.host = std::string(hostport.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = hostport.substr(colon + 1);
    }
  }
  if (out.host.empty()) return Status::InvalidArgument("no host");
  if (!port_text.empty()) {
    if (port_text.size() > 5) return Status::InvalidArgument("bad port");
    int port = 0;
    for (char c : port_text) {
      if (c < '0' || c > '9') return Status::InvalidArgument("bad port");
      port = port * 10 + (c - '0');
    }
    if (port < 1 || port > 65535) return Status::InvalidArgument("bad port");
    out.port = port;
  }
  out.base_path = std::string(path);
  return out;
}

}  // namespace aw::util
