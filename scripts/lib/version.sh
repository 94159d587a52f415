#!/usr/bin/env bash
# The build's version, commit and date for the scripts that build images (scripts/image,
# scripts/e2e-kind, scripts/release), the same values cmake/build_info.cmake derives for a CMake
# build: the VERSION file's line; the git commit (12 hex digits, "-dirty" when tracked files have
# uncommitted changes, "unknown" outside a checkout); RFC 3339 UTC, SOURCE_DATE_EPOCH when set,
# else the commit's date. Sourced; needs ROOT (the repository root).

aw_version() { head -n 1 "$ROOT/VERSION" | tr -d '[:space:]'; }

aw_commit() {
  local c
  c=$(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null) || { echo unknown; return 0; }
  if [[ -n $(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null) ]]; then c="$c-dirty"; fi
  echo "$c"
}

aw_build_date() {
  if [[ -n ${SOURCE_DATE_EPOCH:-} ]]; then
    date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ
  else
    TZ=UTC git -C "$ROOT" show -s --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd HEAD 2>/dev/null || echo unknown
  fi
}
