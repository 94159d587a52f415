#include "resolver/patches.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "admission/keys.h"

namespace aw::resolver {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void Op(Writer& w, const char* op, const std::string& path, std::string_view value) {
  w.StartObject();
  w.Key("op");
  w.String(op);
  w.Key("path");
  w.String(path.data(), static_cast<rapidjson::SizeType>(path.size()));
  w.Key("value");
  w.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
  w.EndObject();
}

std::string AnnotationPath(std::string_view key) {
  return "/metadata/annotations/" + EscapeJsonPointer(key);
}

struct AnnotationSet {
  std::string_view key;
  std::string value;
};

std::string Build(const GameServerView& gs, std::string_view state,
                  const std::vector<AnnotationSet>& sets) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartArray();
  Op(w, "test", "/metadata/resourceVersion", gs.resource_version);
  if (!gs.allocation.empty()) Op(w, "test", AnnotationPath(keys::kAllocation), gs.allocation);
  Op(w, "replace", "/status/state", state);
  if (!gs.has_annotations) {
    w.StartObject();
    w.Key("op");
    w.String("add");
    w.Key("path");
    w.String("/metadata/annotations");
    w.Key("value");
    w.StartObject();
    for (const auto& s : sets) {
      w.Key(s.key.data(), static_cast<rapidjson::SizeType>(s.key.size()));
      w.String(s.value.data(), static_cast<rapidjson::SizeType>(s.value.size()));
    }
    w.EndObject();
    w.EndObject();
  } else {
    // "add" on an existing member replaces it (RFC 6902 4.1).
    for (const auto& s : sets) Op(w, "add", AnnotationPath(s.key), s.value);
  }
  w.EndArray();
  return std::string(buf.GetString(), buf.GetSize());
}

}  // namespace

std::string EscapeJsonPointer(std::string_view token) {
  std::string out;
  out.reserve(token.size() + 4);
  for (char c : token) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::string PromotePatch(const GameServerView& gs) {
  return Build(gs, keys::kStateAllocated,
               {{keys::kConfirmed, gs.allocation},
                {keys::kOutcome, std::string(keys::kOutcomeConfirmed)}});
}

std::string TimeoutPatch(const GameServerView& gs, admission::OnTimeout action) {
  std::vector<AnnotationSet> sets;
  if (action == admission::OnTimeout::kAllocated) sets.push_back({keys::kConfirmed, gs.allocation});
  sets.push_back({keys::kOutcome, std::string(keys::kOutcomeTimedOut)});
  return Build(gs, admission::OnTimeoutName(action), sets);
}

}  // namespace aw::resolver
