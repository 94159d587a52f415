// What a binary was built from: the project's version (the VERSION file), the commit and the build
// date, as `--version` prints them and the `*_build_info` metric exports them.
//
// Promise: the values are fixed at build time (CMake's cmake/build_info.cmake writes them into a
// generated unit on every build; the image build passes them in), never read at run time, so
// two processes of one binary always report the same. `version` is the VERSION file's one line
// (semantic version), `commit` the git commit (12 hex digits, "-dirty" when the tree had
// uncommitted changes; "unknown" outside a git checkout unless given), `build_date` RFC 3339 UTC
// (SOURCE_DATE_EPOCH when set, else the commit's date, so a rebuild of a commit is identical).
#pragma once

#include <string>
#include <string_view>

namespace prometheus {
class Registry;
}

namespace aw::build {

struct Info {
  std::string_view version;
  std::string_view commit;
  std::string_view build_date;
};

// The values this binary was built with.
const Info& Get();

// The text of `PROGRAM --version`: "PROGRAM VERSION\ncommit: C\nbuild date: D\n".
std::string VersionText(std::string_view program);

// Registers NAME{version, commit, build_date} = 1 (a Prometheus info gauge) in the registry.
void AddBuildInfoMetric(prometheus::Registry& registry, const std::string& name,
                        const std::string& help);

}  // namespace aw::build
