#include "util/io/build_info.h"

#include <prometheus/gauge.h>
#include <prometheus/registry.h>

// Defined in the unit cmake/build_info.cmake generates in the build tree.
namespace aw::build::generated {
extern const char kVersion[];
extern const char kCommit[];
extern const char kBuildDate[];
}  // namespace aw::build::generated

namespace aw::build {

const Info& Get() {
  static const Info info{generated::kVersion, generated::kCommit, generated::kBuildDate};
  return info;
}

std::string VersionText(std::string_view program) {
  const Info& i = Get();
  std::string out;
  out.append(program).append(" ").append(i.version).append("\n");
  out.append("commit: ").append(i.commit).append("\n");
  out.append("build date: ").append(i.build_date).append("\n");
  return out;
}

void AddBuildInfoMetric(prometheus::Registry& registry, const std::string& name,
                        const std::string& help) {
  const Info& i = Get();
  prometheus::BuildGauge()
      .Name(name)
      .Help(help)
      .Register(registry)
      .Add({{"version", std::string(i.version)},
            {"commit", std::string(i.commit)},
            {"build_date", std::string(i.build_date)}})
      .Set(1);
}

}  // namespace aw::build
