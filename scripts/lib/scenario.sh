#!/usr/bin/env bash
# The allocation scenario shared by scripts/e2e-kind (real Agones on kind) and the local manifest
# checks (test/e2e/manifests/check.sh, a bare kube-apiserver with the webhook running outside it):
# whatever allocated the server, the steps from "allocated" to "playable" are the same.
# Needs scripts/lib/kube.sh sourced first.

# scenario_held_then_confirmed NS NAME [ALLOCATION_ID]: the GameServer just allocated must be held
# in Allocating (with since/allocation set), stay there while the game server has not confirmed,
# and become Allocated (outcome Confirmed, confirmed = the id) once the readiness annotation is
# set the way the SDK does. The id defaults to the allocation annotation on the object.
scenario_held_then_confirmed() {
  local ns="$1" name="$2" id="${3:-}" since
  wait_gs_state "$ns" "$name" Allocating 10 || return 1
  since=$(gs_annotation "$ns" "$name" allocating.agones.dev/since)
  assert_nonempty "allocating.agones.dev/since" "$since" || return 1
  [[ -n "$id" ]] || id=$(gs_annotation "$ns" "$name" allocating.agones.dev/allocation)
  assert_nonempty "allocation id" "$id" || return 1
  assert_eq "allocation id on the GameServer" "$id" \
    "$(gs_annotation "$ns" "$name" allocating.agones.dev/allocation)" || return 1
  # A moment later it is still held: nothing confirms without the readiness annotation.
  sleep 2
  assert_eq "state before readiness" Allocating "$(gs_state "$ns" "$name")" || return 1
  sdk_set_annotation "$ns" "$name" allocating-ready "$id" || return 1
  wait_gs_state "$ns" "$name" Allocated 15 || return 1
  assert_eq "outcome" Confirmed "$(gs_annotation "$ns" "$name" allocating.agones.dev/outcome)" || return 1
  assert_eq "confirmed id" "$id" "$(gs_annotation "$ns" "$name" allocating.agones.dev/confirmed)"
}
