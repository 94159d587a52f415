// Finding the objects inside a list page or a watch event without building a document.
//
// Promise: ScanListPage and ScanWatchEvent read the whole text with rapidjson's SAX reader
// (iterative: no nesting is too deep), so it is checked JSON, and return where each object is
// (views into the caller's text, valid as long as it is) and the few strings around them:
//   - a list page ({"metadata":{"resourceVersion","continue"},"items":[...]}): the text of each
//     element of `items` that is an object, in order, and how many elements were not objects;
//   - a watch event ({"type":"ADDED","object":{...}}): its type and the text of its object.
// Like rapidjson's FindMember, only the first occurrence of a key counts. InvalidArgument saying
// what is wrong for text that is not JSON, not an object, or lacks what the form requires (a watch
// event without a string type or an object). An ERROR event's object is a Status: decode it with
// ParseWatchEvent (watch_stream.h). Pure: no I/O.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kube/core/watch_stream.h"
#include "util/status.h"

namespace aw::kube {

struct ListPageScan {
  std::string resource_version;  // metadata.resourceVersion
  std::string continue_token;    // metadata.continue
  std::vector<std::string_view> items;
  size_t non_object_items = 0;
};
StatusOr<ListPageScan> ScanListPage(std::string_view body);

struct RawWatchEvent {
  WatchEvent::Type type = WatchEvent::Type::kError;
  std::string_view object;  // the object's JSON text
};
StatusOr<RawWatchEvent> ScanWatchEvent(std::string_view line);

}  // namespace aw::kube
