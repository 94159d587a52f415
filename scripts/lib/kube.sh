#!/usr/bin/env bash
# Small wait/assert helpers on top of kubectl, sourced by scripts/e2e-kind and
# scripts/check-manifests (and usable from any e2e script). Every helper uses the kubectl command
# in the KUBECTL array (default: plain kubectl), so callers can add --kubeconfig/--context once.
# Functions return non-zero (never exit) so callers decide; `die` is the only one that exits.

if ! declare -p KUBECTL >/dev/null 2>&1; then KUBECTL=(kubectl); fi

kube_log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { kube_log "FAIL: $*"; exit 1; }

kc() { "${KUBECTL[@]}" "$@"; }

# retry_until SECONDS CMD...: runs CMD every second until it succeeds or SECONDS pass.
retry_until() {
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 1
  done
}

# wait_crds_established SECONDS CRD...: waits until every named CRD reports Established. Polls
# instead of `kubectl wait`, which fails at once ("conditions accessor error") while a just-created
# CRD has no status.conditions yet.
crd_established() {
  [[ $(kc get crd "$1" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null) == True ]]
}
wait_crds_established() {
  local secs=$1 crd; shift
  for crd in "$@"; do
    retry_until "$secs" crd_established "$crd" || { kube_log "CRD $crd not Established after ${secs}s"; return 1; }
  done
}

# assert_eq WHAT EXPECTED ACTUAL
assert_eq() {
  if [[ "$2" != "$3" ]]; then
    kube_log "assertion failed: $1: expected '$2', got '$3'"
    return 1
  fi
  kube_log "ok: $1 = '$3'"
}

# assert_nonempty WHAT VALUE
assert_nonempty() {
  if [[ -z "$2" ]]; then
    kube_log "assertion failed: $1 is empty"
    return 1
  fi
  kube_log "ok: $1 = '$2'"
}

# gs_field NS NAME JSONPATH: one field of a GameServer (empty when absent).
gs_field() { kc -n "$1" get gameservers.agones.dev "$2" -o "jsonpath={$3}" 2>/dev/null; }

# jsonpath_key KEY: escapes the dots of an annotation/label key for kubectl's JSONPath.
jsonpath_key() { printf '%s' "${1//./\\.}"; }

# gs_state NS NAME / gs_annotation NS NAME KEY
gs_state() { gs_field "$1" "$2" .status.state; }
gs_annotation() { gs_field "$1" "$2" ".metadata.annotations.$(jsonpath_key "$3")"; }

_gs_state_is() { [[ "$(gs_state "$1" "$2")" == "$3" ]]; }

# wait_gs_state NS NAME STATE SECONDS: waits for the GameServer to reach STATE.
wait_gs_state() {
  if retry_until "$4" _gs_state_is "$1" "$2" "$3"; then
    kube_log "ok: gameserver $1/$2 is $3"
    return 0
  fi
  kube_log "gameserver $1/$2 did not reach $3 within $4s (state: '$(gs_state "$1" "$2")')"
  kc -n "$1" get gameservers.agones.dev "$2" -o yaml >&2 || true
  return 1
}

# sdk_set_annotation NS NAME KEY VALUE: writes agones.dev/sdk-KEY the way the Agones SDK sidecar does
# (a JSON patch whose first operation tests metadata.resourceVersion), retrying on conflicts, as the
# sidecar's identity: a TokenRequest token of NS's service account $AW_SDK_SERVICE_ACCOUNT (default
# agones-sdk, which Agones' Helm chart creates in its game-server namespaces). The webhook accepts the
# readiness annotation only from the game server's own SDK. curl, not kubectl patch: kubectl GETs the
# object first, which Agones' SDK role does not allow (list, watch, patch only).
sdk_set_annotation() {
  local ns="$1" name="$2" value="$4" sa="${AW_SDK_SERVICE_ACCOUNT:-agones-sdk}"
  local token server ca rv has_annotations patch attempt
  token=$(kc -n "$ns" create token "$sa" --duration=1h) ||
    { kube_log "sdk_set_annotation: no token for service account $ns/$sa"; return 1; }
  server=$(kc config view --minify --raw -o 'jsonpath={.clusters[0].cluster.server}') || return 1
  ca=$(mktemp)
  kc config view --minify --raw -o 'jsonpath={.clusters[0].cluster.certificate-authority-data}' |
    base64 -d >"$ca" || { rm -f "$ca"; return 1; }
  for attempt in 1 2 3 4 5; do
    rv=$(gs_field "$ns" "$name" .metadata.resourceVersion)
    has_annotations=$(gs_field "$ns" "$name" .metadata.annotations)
    if [[ -z "$has_annotations" ]]; then
      patch=$(printf '[{"op":"test","path":"/metadata/resourceVersion","value":"%s"},{"op":"add","path":"/metadata/annotations","value":{"agones.dev/sdk-%s":"%s"}}]' "$rv" "$3" "$value")
    else
      patch=$(printf '[{"op":"test","path":"/metadata/resourceVersion","value":"%s"},{"op":"add","path":"/metadata/annotations/agones.dev~1sdk-%s","value":"%s"}]' "$rv" "$3" "$value")
    fi
    if curl -fsS --max-time 10 --cacert "$ca" -X PATCH -H "Authorization: Bearer $token" \
        -H "Content-Type: application/json-patch+json" --data "$patch" \
        "$server/apis/agones.dev/v1/namespaces/$ns/gameservers/$name" >/dev/null; then
      kube_log "ok: set agones.dev/sdk-$3=$value on $ns/$name as system:serviceaccount:$ns:$sa (attempt $attempt)"
      rm -f "$ca"
      return 0
    fi
    sleep 1
  done
  rm -f "$ca"
  return 1
}

# crd_enum_has_allocating: the GameServer CRD's status.state enum lists Allocating in every
# served version.
crd_enum_has_allocating() {
  local enums
  enums=$(kc get crd gameservers.agones.dev -o \
    'jsonpath={range .spec.versions[?(@.served==true)]}{.schema.openAPIV3Schema.properties.status.properties.state.enum}{"\n"}{end}' 2>/dev/null) || return 1
  [[ -n "$enums" ]] || return 1
  ! grep -qv '"Allocating"' <<<"$enums"
}

# webhook_ca_bundle KIND NAME INDEX: the decoded caBundle (PEM) of one webhook.
webhook_ca_bundle() {
  kc get "$1" "$2" -o "jsonpath={.webhooks[$3].clientConfig.caBundle}" | base64 -d
}
