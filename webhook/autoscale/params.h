// Where a FleetAutoscaler's Webhook policy puts our parameters, and how they are read back.
//
// Agones builds the request URL two ways (pkg/fleetautoscalers buildURLFromConfiguration):
//   - `webhook.url`: parsed as given, so a query string survives:
//       https://host:8443/autoscale/buffer?bufferSize=5&maxReplicas=100
//   - `webhook.service{name,namespace,port,path}`: `path` is set as the URL's *path*, which Go
//     escapes when it sends the request: '?' becomes %3F and '%' becomes %25. Parameters go in
//     path segments instead:
//       path: /autoscale/buffer/bufferSize=5/minReplicas=2/maxReplicas=100
//       path: /autoscale/buffer/bufferSize=20%/minReplicas=2/maxReplicas=100   (sent as 20%25)
//
// Promise: SplitParams(prefix, path, query) takes the request target's path (before any raw '?')
// and raw query, and returns the parameters in the order given: first the `name=value` path
// segments after `prefix`, then the `&`-separated pairs of the query. Both are percent-decoded
// (a '%' not followed by two hex digits is kept as is, so `20%` works unescaped). A decoded path
// that contains '?' (Agones' escaping of a `service.path` written with a query) is split there and
// its tail read as a query, so that form works too. Empty segments/pairs are skipped. Errors
// (InvalidArgument, naming the offending text): a path that does not start with `prefix` followed
// by '/' or nothing, a segment or pair without '=', an empty name. Pure; thread-safe.
#pragma once

#include <string_view>
#include <vector>

#include "autoscale/buffer.h"
#include "util/status.h"

namespace aw::autoscale {

Status SplitParams(std::string_view prefix, std::string_view path, std::string_view query,
                   std::vector<Param>* out);

// Percent-decoding as described above.
std::string PercentDecode(std::string_view s);

}  // namespace aw::autoscale
