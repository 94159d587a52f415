// The compact GameServer record decoded straight from JSON text: the caches' form of a GameServer.
//
// Promise: DecodeGameServer(text) yields exactly what ParseGameServer(document, Parse::kLenient)
// yields for the same text (every field of GameServerView, compared field by field in
// test/unit/policy_gameserver_stream_test.cc over the fixtures and random GameServers), in one
// streaming pass over the bytes (rapidjson's SAX reader, iterative: no recursion, so no nesting is
// too deep) without building a document: managedFields, spec (the pod template included) and every
// other value the view does not hold are skipped as they are read. Lenient like the document
// path: a mistyped field is left empty, nothing throws. InvalidArgument (with rapidjson's error and
// the byte offset) when the text is not one JSON value. Pure, no I/O.
#pragma once

#include <string_view>

#include "policy/gameserver.h"
#include "util/status.h"

namespace aw::policy {

Status DecodeGameServer(std::string_view json, GameServerView* out);

}  // namespace aw::policy
