// The one parser of the program's outgoing URLs: the Kubernetes API server's (kubeconfig
// `server:`, in-cluster) and agones-allocator's (--allocator-address).
//
// Promise: ParseHttpUrl("scheme://host[:port][/prefix]") splits an http:// or https:// URL into
// its scheme, host (an IPv6 literal without its brackets), port (the scheme's default, 443 or 80,
// when none, or an empty one after the colon, as Go's net/url reads it) and base path (the prefix
// without trailing slashes, "" for none). Anything else is an InvalidArgument that says what is
// wrong ("must start with http:// or https://", "bad IPv6 literal", "bad port", "no host"), for the
// caller to prefix with the URL's source. Pure.
#pragma once

#include <string>
#include <string_view>

#include "util/status.h"

namespace aw::util {

struct HttpUrl {
  bool https = true;
  std::string host;
  int port = 443;
  std::string base_path;
};

StatusOr<HttpUrl> ParseHttpUrl(std::string_view url);

}  // namespace aw::util
