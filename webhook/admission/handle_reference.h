// The document path of admission::Handle (handler.h), kept as the reference the admission hot path
// is checked against (issue 36).
//
// Promise: HandleReference answers every route as Handle did before the one pass
// (review_scan.h): the whole body parsed into a document (ParseReview), request.object and
// request.oldObject into views (ParseGameServer, kStrict), every 400 worded from them. Handle uses
// it for every route but /mutate/gameservers and for every review of that route the one pass does
// not answer; test/unit/admission_scan_test.cc and the fuzz target check that Handle and
// HandleReference answer every input alike. Pure, no I/O; never throws.
#pragma once

#include <string_view>

#include "admission/handler.h"

namespace aw::admission {

HandlerResult HandleReference(Route route, std::string_view body, const Context& ctx);

}  // namespace aw::admission
