#!/usr/bin/env bash
# The commands the project's scripts call and the Debian/Ubuntu package that provides each: one list
# for a contributor's machine, the CI and the kind test. Sourced, never run.
#
#   source scripts/lib/tools.sh
#   aw_require WHO CMD...     exits 1 naming every missing CMD and how to get it (WHO prefixes the
#                             message, e.g. "e2e-kind")
#   aw_tool_package CMD       prints the package that provides CMD (empty: not an apt package)
#   AW_KIND_TOOLS             what scripts/e2e-kind calls on a CI runner besides the runner's own
#                             docker, kubectl and go (setup-go): `scripts/setup --kind` installs their
#                             packages (names that are the same on Debian bookworm and Ubuntu 24.04),
#                             and scripts/e2e-kind's preflight checks them
#
# scripts/setup (no argument) installs its full list, a superset of these (it checks that it is).

# protoc: the gateway scenario generates its gRPC client (test/e2e/hack/gen-grpc); flock: go-tool's lock.
# shellcheck disable=SC2034  # used by the scripts that source this file
AW_KIND_TOOLS=(protoc jq curl openssl python3 git flock sha256sum)

aw_tool_package() {
  case "$1" in
    protoc) echo protobuf-compiler ;;
    flock) echo util-linux ;;
    sha256sum) echo coreutils ;;
    ninja) echo ninja-build ;;
    clang | clang++) echo clang ;;
    c++ | g++ | gcc | make) echo build-essential ;;
    go | kubectl | docker | kind | helm) ;;   # not from apt: setup-go / the runner / scripts/ci/go-tool
    *) echo "$1" ;;
  esac
}

# How to get a command that is not an apt package.
_aw_tool_hint() {
  case "$1" in
    go) echo "Go >= 1.26 (https://go.dev/dl; the workflows: actions/setup-go)" ;;
    kubectl) echo "kubectl (GitHub's ubuntu runners ship it; https://kubernetes.io/docs/tasks/tools/)" ;;
    docker) echo "docker (GitHub's ubuntu runners ship it) or podman with KIND_EXPERIMENTAL_PROVIDER=podman" ;;
    *) echo "the package $(aw_tool_package "$1"): scripts/setup installs it" ;;
  esac
}

aw_require() {
  local who="$1" t missing=0
  shift
  for t in "$@"; do
    if ! command -v "$t" >/dev/null 2>&1; then
      echo "$who: $t not found: $(_aw_tool_hint "$t")" >&2
      missing=1
    fi
  done
  ((missing == 0)) || exit 1
}
