#!/usr/bin/env bash
# The allocation scenario shared by scripts/e2e-kind (real Agones on kind) and the local manifest
# checks (test/e2e/manifests/check.sh, a bare kube-apiserver with the webhook running outside it):
# whatever allocated the server, the steps from "allocated" to "playable" are the same.
# Also the fixtures those tests and test/node/e2e share: a GameServer from the example Fleet,
# Agones' SDK identity in a namespace, a matchmaker's client certificate for the gateway.
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

# example_gameserver NS NAME: prints a GameServer made from the example Fleet's template
# (manifests/examples): its labels and annotations, with agones.dev/fleet set.
example_gameserver() {
  kc kustomize "$ROOT/manifests/examples" | kc create --dry-run=client -o json -f - |
    jq -c 'if .kind == "List" then .items[] else . end | select(.kind == "Fleet")' |
    jq --arg ns "$1" --arg name "$2" '{apiVersion: "agones.dev/v1", kind: "GameServer",
      metadata: {name: $name, namespace: $ns,
        labels: ((.spec.template.metadata.labels // {}) + {"agones.dev/fleet": .metadata.name}),
        annotations: (.spec.template.metadata.annotations // {})},
      spec: .spec.template.spec}'
}

# The webhook accepts agones.dev/sdk-allocating-ready only from the GameServer's own SDK identity
# (issue 9): use_sdk_identity NS gives namespace NS a ServiceAccount agones-sdk with Agones' SDK
# rights (gameservers list/watch/patch), as Agones' Helm chart does in its game-server namespaces;
# scripts/lib/kube.sh's sdk_set_annotation then writes as that service account. Idempotent.
use_sdk_identity() {
  local ns="$1"
  kc -n "$ns" create serviceaccount agones-sdk --dry-run=client -o yaml | kc apply -f - >/dev/null || return 1
  kc -n "$ns" create role agones-sdk --verb=list,watch,patch --resource=gameservers.agones.dev \
    --dry-run=client -o yaml | kc apply -f - >/dev/null || return 1
  kc -n "$ns" create rolebinding agones-sdk-access --role=agones-sdk \
    --user="system:serviceaccount:$ns:agones-sdk" --dry-run=client -o yaml | kc apply -f - >/dev/null
}

# gateway_client_cert DIR: a matchmaker client CA (DIR/client-ca.crt) and a client certificate
# signed by it (DIR/client.crt, DIR/client.key, extendedKeyUsage clientAuth).
gateway_client_cert() {
  local d="$1"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=matchmaker-ca \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
    -keyout "$d/client-ca.key" -out "$d/client-ca.crt" 2>/dev/null || return 1
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=matchmaker \
    -keyout "$d/client.key" -out "$d/client.csr" 2>/dev/null || return 1
  printf 'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n' >"$d/client.ext"
  openssl x509 -req -in "$d/client.csr" -CA "$d/client-ca.crt" -CAkey "$d/client-ca.key" -CAcreateserial \
    -days 1 -extfile "$d/client.ext" -out "$d/client.crt" 2>/dev/null
}
