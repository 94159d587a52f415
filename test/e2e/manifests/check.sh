#!/usr/bin/env bash
# Checks the shipped manifests and scripts/install-certs against a real kube-apiserver.
#
#   test/e2e/manifests/check.sh [--kubeconfig FILE] [--only CHECK]
#
# Without --kubeconfig it starts its own control plane (scripts/controlplane with
# AW_E2E_DIR=build/e2e-manifests) and stops it at the end. With one, it uses that cluster's admin
# context (the Go test test/e2e/manifests gives it its own control plane). The checks up to
# install-certs touch nothing other tests use (namespaces aw-*, inert webhook configurations named
# aw-certs-check, otherwise --dry-run=server); rbac-live and example-flow run the program, which
# edits the GameServer CRD's enum, and example-flow registers the webhook configurations
# allocating-webhook: give them a control plane of their own.
#
# Checks:
#   render        kubectl kustomize renders base, every overlay and the examples; the
#                 network-policy component composed with the base (as manifests/README.md shows)
#                 renders one NetworkPolicy selecting the Deployment's pods on its named ports
#   dry-run       kubectl apply --dry-run=server of base, every overlay and the example Fleet
#                 succeeds with no warning (cert-manager overlay: against minimal stub CRDs for
#                 Issuer/Certificate, test/e2e/manifests/testdata, with strict field validation);
#                 the network-policy component with a control-plane CIDR set is accepted, and
#                 without it refused (its placeholder CIDR is invalid on purpose)
#   pod-security  the Deployment's pod passes Pod Security "restricted" (a Pod built from the
#                 template is admitted with no warning in an enforce=restricted namespace, and a
#                 negative control without the securityContext is refused)
#   rbac          the service account may do exactly what the program needs and no more
#                 (kubectl auth can-i --as, plus real requests with the resolver token when the
#                 kubeconfig has a `resolver` context)
#   install-certs two runs are idempotent; the caBundle verifies the served certificate; renewal
#                 keeps the CA; a CA rotation keeps the old CA in the bundle
#   image-rootfs  the Dockerfile's runtime root (scripts/make-rootfs) built from the local binaries
#                 ($AW_BIN, default build/allocating-webhook, and allocation-gateway next to it)
#                 run as uid 65532 under chroot: --help of both,
#                 then the server with the Deployment's flags answers /healthz, /readyz and HTTPS
#                 (needs root for chroot; skipped otherwise). No container engine is needed.
#   rbac-live     the program itself ($AW_BIN) running as the service account (the kubeconfig's
#                 `resolver` context: a token bound only to the manifests' roles) takes the Lease,
#                 adds Allocating to the GameServer CRD, promotes a ready Allocating GameServer
#                 and records its Event, with no "forbidden" in its log
#   example-flow  the webhook registered from manifests/overlays/local, a GameServer made from the
#                 example Fleet's template (UDP probe on its "default" port, answered by a local
#                 UDP echo), an allocator-style UPDATE to Allocated, then the same steps as
#                 scripts/e2e-kind (scripts/lib/scenario.sh): held in Allocating, confirmed by the
#                 SDK-style readiness patch plus the probe, Allocated with outcome Confirmed
#   failure-policy with no webhook answering: overlays/local (base policy Ignore) lets an update of
#                 an opted-in GameServer through and kube-apiserver counts it in
#                 apiserver_admission_webhook_fail_open_count; the same with
#                 components/failure-policy-fail refuses it ("failed calling webhook") and counts
#                 it in apiserver_admission_webhook_rejection_count; a GameServer without the
#                 label is never concerned (objectSelector)
#   gateway       components/gateway composed with the base renders the gateway's Deployment,
#                 Service, PDB, ServiceAccount and ClusterRole (its args flags of allocation-gateway
#                 --help, its files on mounted Secrets, the webhook's securityContext), is accepted
#                 by a server-side dry run (also with components/gateway-cert-manager on the
#                 cert-manager overlay) and by Pod Security "restricted"; its service account may
#                 get/list/watch/patch GameServers and nothing else; the binary with the Deployment's
#                 arguments, as that service account and with the certificate from
#                 install-certs --gateway, becomes ready, answers a matchmaker with a client
#                 certificate (400 malformed, 503 allocator down) and refuses one without
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
KCFG=""
ONLY=""
OWN_CP=0
while (($#)); do
  case "$1" in
    --kubeconfig) KCFG="$2"; shift ;;
    --kubeconfig=*) KCFG="${1#*=}" ;;
    --only) ONLY="$2"; shift ;;
    --only=*) ONLY="${1#*=}" ;;
    -h | --help) sed -n '2,59p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "manifests check: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

# kubectl: the one on PATH, else the one built with the local control plane (build/cp-bin).
if ! command -v kubectl >/dev/null 2>&1 && [[ -x "$ROOT/build/cp-bin/kubectl" ]]; then
  PATH="$ROOT/build/cp-bin:$PATH"
fi
command -v kubectl >/dev/null || { echo "manifests check: kubectl not found" >&2; exit 1; }

CP_DIR="$ROOT/build/e2e-manifests"
if [[ -z "$KCFG" ]]; then
  OWN_CP=1
  AW_E2E_DIR="$CP_DIR" "$ROOT/scripts/controlplane" up >&2 || { echo "control plane failed" >&2; exit 1; }
  KCFG="$CP_DIR/kubeconfig"
fi
WORK=$(mktemp -d)
STARTED_PIDS=()  # processes this script started (webhook, UDP echo): stopped on any exit
cleanup() {
  local pid
  for pid in "${STARTED_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
  if ((OWN_CP)); then AW_E2E_DIR="$CP_DIR" "$ROOT/scripts/controlplane" down >&2 || true; fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT

ADMIN_CONTEXT=()
if kubectl --kubeconfig "$KCFG" config get-contexts admin >/dev/null 2>&1; then ADMIN_CONTEXT=(--context admin); fi
KUBECTL=(kubectl --kubeconfig "$KCFG" "${ADMIN_CONTEXT[@]}")
# shellcheck source=scripts/lib/kube.sh
source "$ROOT/scripts/lib/kube.sh"
# shellcheck source=scripts/lib/scenario.sh
source "$ROOT/scripts/lib/scenario.sh"

SA_USER=system:serviceaccount:allocating-system:allocating-webhook

passed=0
failed=0
failures=()

# check NAME FUNCTION: runs one check, records its result.
check() {
  local name="$1"; shift
  [[ -z "$ONLY" || "$ONLY" == "$name" ]] || return 0
  kube_log "== check $name"
  if "$@"; then
    passed=$((passed + 1)); kube_log "== check $name: PASS"
  else
    failed=$((failed + 1)); failures+=("$name"); kube_log "== check $name: FAIL"
  fi
}

overlays() { find "$ROOT/manifests/overlays" -mindepth 1 -maxdepth 1 -type d | sort; }

# --- render ----------------------------------------------------------------------------------

check_render() {
  local d ok=0
  for d in "$ROOT/manifests/base" $(overlays) "$ROOT/manifests/examples" "$ROOT/manifests/monitoring"; do
    if kc kustomize "$d" >"$WORK/render.yaml" 2>"$WORK/render.err"; then
      kube_log "ok: renders ${d#"$ROOT"/}"
    else
      kube_log "render failed: ${d#"$ROOT"/}: $(cat "$WORK/render.err")"; ok=1
    fi
  done
  check_network_policy_render || ok=1
  return $ok
}

# --- network-policy component ----------------------------------------------------------------

NP_CIDR=10.11.12.0/28  # a control-plane range, as a user's overlay sets it

# np_overlay DIR [CIDR]: writes DIR/kustomization.yaml, the base with components/network-policy
# and, when CIDR is given, the control plane's range set the way manifests/README.md shows.
np_overlay() {
  local dir="$1" cidr="${2:-}" base comp
  mkdir -p "$dir"
  base=$(realpath --relative-to="$dir" "$ROOT/manifests/base")
  comp=$(realpath --relative-to="$dir" "$ROOT/manifests/components/network-policy")
  {
    printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n'
    printf 'resources:\n  - %s\ncomponents:\n  - %s\n' "$base" "$comp"
    if [[ -n "$cidr" ]]; then
      printf 'patches:\n  - target: {kind: NetworkPolicy, name: allocating-webhook}\n'
      printf '    patch: |-\n      - op: replace\n        path: /spec/ingress/0/from/0/ipBlock/cidr\n'
      printf '        value: %s\n' "$cidr"
    fi
  } >"$dir/kustomization.yaml"
}

# The rendered NetworkPolicy must select the Deployment's pods, allow only Ingress, and name only
# ports the container declares: https (admission, from the CIDR) and health (from Prometheus).
check_network_policy_render() {
  local ok=0 objs np deployment
  np_overlay "$WORK/np" "$NP_CIDR"
  if ! kc kustomize "$WORK/np" >"$WORK/np.yaml" 2>"$WORK/np.err"; then
    kube_log "render failed: base + components/network-policy: $(cat "$WORK/np.err")"; return 1
  fi
  objs=$(kc create --dry-run=client -o json -f "$WORK/np.yaml" | jq -c 'if .kind == "List" then .items[] else . end')
  np=$(jq -c 'select(.kind == "NetworkPolicy")' <<<"$objs")
  deployment=$(jq -c 'select(.kind == "Deployment")' <<<"$objs")
  assert_eq "NetworkPolicies rendered" 1 "$(jq -s length <<<"$np")" || return 1
  assert_eq "NetworkPolicy namespace/name" allocating-system/allocating-webhook \
    "$(jq -r '.metadata.namespace + "/" + .metadata.name' <<<"$np")" || ok=1
  assert_eq "policyTypes" '["Ingress"]' "$(jq -c .spec.policyTypes <<<"$np")" || ok=1
  # podSelector labels are a subset of the pod template's labels.
  assert_eq "podSelector selects the Deployment's pods" true "$(jq -n --argjson np "$np" --argjson d "$deployment" \
    '$np.spec.podSelector.matchLabels | to_entries | all(. as $e | $d.spec.template.metadata.labels[$e.key] == $e.value)')" || ok=1
  assert_eq "ingress ports" 'https,health' "$(jq -r '[.spec.ingress[].ports[].port] | join(",")' <<<"$np")" || ok=1
  assert_eq "ingress ports are the container's port names" true "$(jq -n --argjson np "$np" --argjson d "$deployment" \
    '[$d.spec.template.spec.containers[].ports[].name] as $names | [$np.spec.ingress[].ports[].port] | all(. as $p | $names | index($p))')" || ok=1
  assert_eq "admission port from the control-plane CIDR only" "[{\"ipBlock\":{\"cidr\":\"$NP_CIDR\"}}]" \
    "$(jq -c '.spec.ingress[0].from' <<<"$np")" || ok=1
  assert_eq "health port from Prometheus in monitoring" \
    '[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}},"podSelector":{"matchLabels":{"app.kubernetes.io/name":"prometheus"}}}]' \
    "$(jq -c '.spec.ingress[1].from' <<<"$np")" || ok=1
  # Without the user's CIDR it still renders (kustomize does not check values), with the placeholder.
  np_overlay "$WORK/np-unset"
  if kc kustomize "$WORK/np-unset" >"$WORK/np-unset.yaml" 2>"$WORK/np.err" &&
    grep -q 'cidr: SET-THE-CONTROL-PLANE-CIDR' "$WORK/np-unset.yaml"; then
    kube_log "ok: renders base + components/network-policy without a CIDR (placeholder kept)"
  else
    kube_log "render of base + components/network-policy without a CIDR: $(cat "$WORK/np.err")"; ok=1
  fi
  return $ok
}

# The component is accepted by kube-apiserver once the CIDR is set, and refused without it.
check_network_policy_dry_run() {
  local ok=0
  np_overlay "$WORK/np" "$NP_CIDR"
  dry_run_apply "$WORK/np" || ok=1
  np_overlay "$WORK/np-unset"
  if kc apply --dry-run=server -k "$WORK/np-unset" >/dev/null 2>"$WORK/np-unset.err"; then
    kube_log "the network-policy component without a CIDR was accepted: the placeholder must be refused"; ok=1
  elif grep -q 'ipBlock.cidr' "$WORK/np-unset.err"; then
    kube_log "ok: without a CIDR the NetworkPolicy is refused ($(grep -m1 'ipBlock.cidr' "$WORK/np-unset.err" | head -c 160))"
  else
    kube_log "the network-policy component without a CIDR failed for another reason:"; cat "$WORK/np-unset.err" >&2; ok=1
  fi
  return $ok
}

# --- server dry-run --------------------------------------------------------------------------

# dry_run_apply DIR: server-side dry-run apply, no error and no warning.
dry_run_apply() {
  local rel="${1#"$ROOT"/}"
  if ! kc apply --dry-run=server --validate=strict -k "$1" >"$WORK/apply.out" 2>"$WORK/apply.err"; then
    kube_log "dry-run apply of $rel failed:"; cat "$WORK/apply.err" >&2
    return 1
  fi
  if grep -qi 'warning' "$WORK/apply.err"; then
    kube_log "dry-run apply of $rel raised warnings:"; cat "$WORK/apply.err" >&2
    return 1
  fi
  kube_log "ok: kubectl apply --dry-run=server -k $rel ($(wc -l <"$WORK/apply.out") objects, no warning)"
}

install_cert_manager_stubs() {
  kc apply -f "$ROOT/test/e2e/manifests/testdata/cert-manager-crds.yaml" >/dev/null &&
    wait_crds_established 60 issuers.cert-manager.io certificates.cert-manager.io
}

check_dry_run() {
  local d ok=0
  dry_run_apply "$ROOT/manifests/base" || ok=1
  for d in $(overlays); do
    if [[ "$(basename "$d")" == cert-manager ]]; then
      install_cert_manager_stubs || { kube_log "cannot install the cert-manager stub CRDs"; ok=1; continue; }
    fi
    dry_run_apply "$d" || ok=1
  done
  dry_run_apply "$ROOT/manifests/examples" || ok=1
  check_network_policy_dry_run || ok=1
  # Both webhook configurations must carry the cert-manager annotation in that overlay.
  local n
  n=$(kc kustomize "$ROOT/manifests/overlays/cert-manager" |
    grep -c 'cert-manager.io/inject-ca-from: allocating-system/allocating-webhook-serving')
  assert_eq "webhook configurations with inject-ca-from" 2 "$n" || ok=1
  return $ok
}

# --- Pod Security ----------------------------------------------------------------------------

PSA_NS=aw-psa-check

ensure_namespace() {
  kc create namespace "$1" --dry-run=client -o yaml | kc apply -f - >/dev/null || return 1
  shift
  (($# == 0)) || kc label namespace "$PSA_NS" --overwrite "$@" >/dev/null
}

# base_objects: the rendered base as a stream of JSON objects, one per line.
base_objects() {
  kc kustomize "$ROOT/manifests/base" | kc create --dry-run=client -o json -f - |
    jq -c 'if .kind == "List" then .items[] else . end'
}

# rendered_object KIND: the object of KIND from the rendered base, as JSON.
rendered_object() { base_objects | jq -c --arg kind "$1" 'select(.kind == $kind)'; }

check_pod_security() {
  local ok=0 deployment
  ensure_namespace "$PSA_NS" pod-security.kubernetes.io/enforce=restricted \
    pod-security.kubernetes.io/enforce-version=latest pod-security.kubernetes.io/warn=restricted ||
    return 1
  kc -n "$PSA_NS" create serviceaccount allocating-webhook --dry-run=client -o yaml |
    kc apply -f - >/dev/null || return 1
  deployment=$(rendered_object Deployment)
  [[ -n "$deployment" ]] || { kube_log "no Deployment in the base"; return 1; }

  # The Pod the Deployment would create, in a namespace that enforces "restricted".
  jq --arg ns "$PSA_NS" '{apiVersion: "v1", kind: "Pod",
      metadata: {name: "allocating-webhook-psa", namespace: $ns, labels: .spec.template.metadata.labels},
      spec: .spec.template.spec}' <<<"$deployment" >"$WORK/pod.json"
  if kc create --dry-run=server -f "$WORK/pod.json" >/dev/null 2>"$WORK/pod.err" &&
    ! grep -qi warning "$WORK/pod.err"; then
    kube_log "ok: the Deployment's pod is admitted under enforce=restricted with no warning"
  else
    kube_log "the Deployment's pod is not clean under restricted:"; cat "$WORK/pod.err" >&2; ok=1
  fi

  # The Deployment itself in that namespace: PSA warns on workload templates (warn=restricted).
  jq --arg ns "$PSA_NS" '.metadata.namespace = $ns' <<<"$deployment" >"$WORK/deploy.json"
  if kc apply --dry-run=server -f "$WORK/deploy.json" >/dev/null 2>"$WORK/deploy.err" &&
    ! grep -qi warning "$WORK/deploy.err"; then
    kube_log "ok: the Deployment raises no Pod Security warning"
  else
    kube_log "the Deployment raises warnings:"; cat "$WORK/deploy.err" >&2; ok=1
  fi

  # Negative control: without the security contexts the same pod must be refused (proves the
  # namespace really enforces the level).
  jq 'del(.spec.securityContext) | del(.spec.containers[].securityContext) | .metadata.name = "psa-negative"' \
    "$WORK/pod.json" >"$WORK/bad.json"
  if kc create --dry-run=server -f "$WORK/bad.json" >/dev/null 2>"$WORK/bad.err"; then
    kube_log "negative control admitted: Pod Security is not enforced in $PSA_NS"; ok=1
  elif grep -q 'violates PodSecurity' "$WORK/bad.err"; then
    kube_log "ok: negative control refused ($(head -c 120 "$WORK/bad.err")...)"
  else
    kube_log "negative control failed for another reason:"; cat "$WORK/bad.err" >&2; ok=1
  fi
  return $ok
}

# --- RBAC ------------------------------------------------------------------------------------

# can_i EXPECT VERB RESOURCE [ARGS...]: kubectl auth can-i as the service account.
can_i() {
  local expect="$1"; shift
  local got
  got=$(kc auth can-i --as="$SA_USER" "$@" 2>/dev/null)
  [[ -n "$got" ]] || got=no
  if [[ "$got" == "$expect" ]]; then
    kube_log "ok: can-i $* = $got"
  else
    kube_log "RBAC: can-i $* = $got, want $expect"
    return 1
  fi
}

# as_resolver EXPECT DESC KUBECTL-ARGS...: a real request with the resolver's own token.
as_resolver() {
  local expect="$1" desc="$2"; shift 2
  if kubectl --kubeconfig "$KCFG" --context resolver "$@" >/dev/null 2>"$WORK/resolver.err"; then
    [[ "$expect" == allowed ]] && { kube_log "ok: resolver token: $desc allowed"; return 0; }
    kube_log "RBAC: resolver token: $desc was allowed, want forbidden"; return 1
  fi
  if [[ "$expect" == forbidden ]] && grep -q -i forbidden "$WORK/resolver.err"; then
    kube_log "ok: resolver token: $desc forbidden"; return 0
  fi
  kube_log "RBAC: resolver token: $desc: $(cat "$WORK/resolver.err")"
  return 1
}

check_rbac() {
  local ok=0 v
  # The manifests' RBAC (namespace, service account, roles, bindings) must be what is installed.
  base_objects | jq -s '{apiVersion: "v1", kind: "List", items: [.[] |
      select(.kind | test("^(Namespace|ServiceAccount|ClusterRole|ClusterRoleBinding|Role|RoleBinding)$"))]}' \
      >"$WORK/rbac.json" || return 1
  kc apply -f "$WORK/rbac.json" >/dev/null || { kube_log "cannot apply the manifests' RBAC"; return 1; }

  # Needed: the resolver and the cache.
  for v in get list watch update patch; do can_i yes "$v" gameservers.agones.dev --all-namespaces || ok=1; done
  # Needed: outcome events (both APIs).
  for v in create patch; do
    can_i yes "$v" events -n default || ok=1
    can_i yes "$v" events.events.k8s.io -n default || ok=1
  done
  # Needed: the CRD guard, on that one CRD.
  for v in get list watch patch; do
    can_i yes "$v" customresourcedefinitions.apiextensions.k8s.io/gameservers.agones.dev || ok=1
  done
  # Needed: leader election on its Lease.
  for v in get update; do can_i yes "$v" leases.coordination.k8s.io/allocating-webhook -n allocating-system || ok=1; done
  can_i yes create leases.coordination.k8s.io -n allocating-system || ok=1

  # Not needed, so refused.
  can_i no patch customresourcedefinitions.apiextensions.k8s.io/fleets.agones.dev || ok=1
  can_i no update customresourcedefinitions.apiextensions.k8s.io/gameservers.agones.dev || ok=1
  can_i no delete customresourcedefinitions.apiextensions.k8s.io/gameservers.agones.dev || ok=1
  can_i no list customresourcedefinitions.apiextensions.k8s.io || ok=1
  can_i no create customresourcedefinitions.apiextensions.k8s.io || ok=1
  for v in create delete deletecollection; do can_i no "$v" gameservers.agones.dev -n default || ok=1; done
  can_i no update fleets.agones.dev -n default || ok=1
  can_i no update gameserversets.agones.dev -n default || ok=1
  can_i no create gameserverallocations.allocation.agones.dev -n default || ok=1
  can_i no get secrets -n allocating-system || ok=1
  can_i no get pods -n default || ok=1
  can_i no update leases.coordination.k8s.io/some-other-lease -n allocating-system || ok=1
  can_i no delete leases.coordination.k8s.io/allocating-webhook -n allocating-system || ok=1
  can_i no create leases.coordination.k8s.io -n default || ok=1
  can_i no patch mutatingwebhookconfigurations.admissionregistration.k8s.io/allocating-webhook || ok=1
  can_i no get events -n default || ok=1

  # Real requests with the resolver's token (the identity scripts/controlplane maps to the
  # service account), which also proves the resourceNames + fieldSelector rule for list/watch.
  if kubectl --kubeconfig "$KCFG" config get-contexts resolver >/dev/null 2>&1; then
    as_resolver allowed "list gameservers in every namespace" get gameservers.agones.dev -A || ok=1
    as_resolver allowed "get the GameServer CRD" get crd gameservers.agones.dev || ok=1
    as_resolver allowed "list CRDs with fieldSelector metadata.name=gameservers.agones.dev" \
      get crd --field-selector metadata.name=gameservers.agones.dev || ok=1
    as_resolver allowed "watch the GameServer CRD by fieldSelector" get --raw \
      '/apis/apiextensions.k8s.io/v1/customresourcedefinitions?fieldSelector=metadata.name%3Dgameservers.agones.dev&watch=true&timeoutSeconds=1' || ok=1
    as_resolver forbidden "list every CRD" get crd || ok=1
    as_resolver allowed "patch the GameServer CRD (dry run)" patch crd gameservers.agones.dev \
      --dry-run=server --type=merge -p '{"metadata":{"labels":{"aw-rbac-check":"x"}}}' || ok=1
    as_resolver forbidden "patch another CRD (fleets.agones.dev)" patch crd fleets.agones.dev \
      --dry-run=server --type=merge -p '{"metadata":{"labels":{"aw-rbac-check":"x"}}}' || ok=1
    as_resolver forbidden "read Secrets in its own namespace" -n allocating-system get secrets || ok=1
    as_resolver allowed "create its Lease (dry run)" -n allocating-system create --dry-run=server -f - \
      <<<'{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"allocating-webhook"},"spec":{}}' || ok=1
    as_resolver forbidden "create a Lease in another namespace" -n default create --dry-run=server -f - \
      <<<'{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"allocating-webhook"},"spec":{}}' || ok=1
  else
    kube_log "no 'resolver' context in $KCFG: real-token requests skipped (can-i checks only)"
  fi
  return $ok
}

# --- install-certs ---------------------------------------------------------------------------

CERTS_NS=aw-certs-check
CERTS_CFG=aw-certs-check

# inert_webhook_configs: the base's webhook configurations renamed to $CERTS_CFG, pointing at a
# Service in $CERTS_NS, with an objectSelector no object carries (so they never intercept anything).
inert_webhook_configs() {
  base_objects | jq -s --arg name "$CERTS_CFG" --arg ns "$CERTS_NS" '{apiVersion: "v1", kind: "List", items: [.[] |
      select(.kind | test("WebhookConfiguration$")) |
      .metadata.name = $name |
      .webhooks |= map(.clientConfig.service.namespace = $ns |
        .objectSelector = {matchLabels: {"allocating.agones.dev/manifests-check": "never"}})]}'
}

secret_json() { kc -n "$CERTS_NS" get secret allocating-webhook-tls -o json; }
bundles() {
  local kind
  for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
    kc get "$kind" "$CERTS_CFG" -o 'jsonpath={range .webhooks[*]}{.clientConfig.caBundle}{"\n"}{end}'
  done
}
config_versions() {
  kc get mutatingwebhookconfiguration "$CERTS_CFG" -o 'jsonpath={.metadata.resourceVersion}'
  echo -n " "
  kc get validatingwebhookconfiguration "$CERTS_CFG" -o 'jsonpath={.metadata.resourceVersion}'
}
install_certs() {
  "$ROOT/scripts/install-certs" --kubeconfig "$KCFG" "${ADMIN_CONTEXT[@]}" --namespace "$CERTS_NS" \
    --webhook-config "$CERTS_CFG" --dir "$WORK/certs" "$@" 2>>"$WORK/install-certs.log"
}

# verify_bundles CERT: every webhook's caBundle verifies CERT for the service's DNS name.
verify_bundles() {
  local i=0 b ok=0 host="allocating-webhook.$CERTS_NS.svc"
  while read -r b; do
    base64 -d <<<"$b" >"$WORK/bundle.pem"
    if openssl verify -CAfile "$WORK/bundle.pem" -verify_hostname "$host" -purpose sslserver "$1" >/dev/null 2>&1; then
      i=$((i + 1))
    else
      kube_log "caBundle #$i does not verify the serving certificate for $host"; ok=1
    fi
  done < <(bundles)
  ((ok == 0 && i == 5)) || { kube_log "verified $i of 5 webhooks"; return 1; }
  kube_log "ok: all 5 caBundles verify the served certificate for $host"
}

check_install_certs() {
  local ok=0 s1 s2 b1 b2 v1 v2 n
  kc create namespace "$CERTS_NS" --dry-run=client -o yaml | kc apply -f - >/dev/null || return 1
  kc -n "$CERTS_NS" delete secret allocating-webhook-tls --ignore-not-found >/dev/null
  kc delete mutatingwebhookconfiguration,validatingwebhookconfiguration "$CERTS_CFG" --ignore-not-found >/dev/null
  inert_webhook_configs | kc create -f - >/dev/null || { kube_log "cannot create the test webhook configurations"; return 1; }

  # First run: issues; second run: changes nothing.
  install_certs || { kube_log "install-certs failed: $(cat "$WORK/install-certs.log")"; return 1; }
  s1=$(secret_json) b1=$(bundles) v1=$(config_versions)
  assert_eq "Secret type" kubernetes.io/tls "$(jq -r .type <<<"$s1")" || ok=1
  assert_eq "Secret keys" "ca.crt tls.crt tls.key" "$(jq -r '.data | keys | join(" ")' <<<"$s1")" || ok=1
  if jq -e '.metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]' <<<"$s1" >/dev/null; then
    kube_log "the Secret carries a last-applied annotation (it would hold the key)"; ok=1
  fi
  install_certs || { kube_log "second install-certs failed"; return 1; }
  s2=$(secret_json) b2=$(bundles) v2=$(config_versions)
  assert_eq "Secret resourceVersion after a second run" \
    "$(jq -r .metadata.resourceVersion <<<"$s1")" "$(jq -r .metadata.resourceVersion <<<"$s2")" || ok=1
  # Compared by digest: the data holds the private key, which must not reach the logs.
  assert_eq "Secret data digest after a second run" "$(jq -cS .data <<<"$s1" | sha256sum | cut -c1-16)" \
    "$(jq -cS .data <<<"$s2" | sha256sum | cut -c1-16)" || ok=1
  if [[ "$b1" == "$b2" ]]; then kube_log "ok: caBundles unchanged by the second run"
  else kube_log "caBundles changed on the second run"; ok=1; fi
  assert_eq "webhook configuration resourceVersions after a second run" "$v1" "$v2" || ok=1
  jq -r '.data["tls.crt"]' <<<"$s2" | base64 -d >"$WORK/served1.crt"
  verify_bundles "$WORK/served1.crt" || ok=1

  # Renewal inside the window: new serving certificate, same CA, caBundle untouched.
  install_certs --renew-days 400 || { kube_log "renewal failed"; return 1; }
  jq -r '.data["tls.crt"]' <<<"$(secret_json)" | base64 -d >"$WORK/served2.crt"
  if cmp -s "$WORK/served1.crt" "$WORK/served2.crt"; then
    kube_log "--renew-days 400 did not renew a 365-day certificate"; ok=1
  else
    kube_log "ok: renewed inside the renewal window"
  fi
  if [[ "$(bundles)" == "$b1" ]]; then kube_log "ok: renewal with the same CA leaves the caBundles alone"
  else kube_log "renewal changed the caBundles"; ok=1; fi
  verify_bundles "$WORK/served2.crt" || ok=1

  # CA rotation: the bundle trusts the new and the previous CA, so both certificates verify.
  install_certs --force || { kube_log "forced rotation failed"; return 1; }
  jq -r '.data["tls.crt"]' <<<"$(secret_json)" | base64 -d >"$WORK/served3.crt"
  n=$(kc get validatingwebhookconfiguration "$CERTS_CFG" -o 'jsonpath={.webhooks[0].clientConfig.caBundle}' |
    base64 -d | grep -c 'BEGIN CERTIFICATE')
  assert_eq "CA certificates in the bundle after a CA rotation" 2 "$n" || ok=1
  verify_bundles "$WORK/served3.crt" || ok=1
  verify_bundles "$WORK/served2.crt" || ok=1

  kc delete mutatingwebhookconfiguration,validatingwebhookconfiguration "$CERTS_CFG" --ignore-not-found >/dev/null
  kc -n "$CERTS_NS" delete secret allocating-webhook-tls --ignore-not-found >/dev/null
  return $ok
}

# --- image root filesystem --------------------------------------------------------------------

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

check_image_rootfs() {
  local bin="${AW_BIN:-$ROOT/build/allocating-webhook}" rootfs="$WORK/rootfs" tls port health pid ok=0 args
  if [[ ! -x "$bin" ]]; then kube_log "skipped: no webhook binary at $bin"; return 0; fi
  if [[ $(id -u) -ne 0 ]]; then kube_log "skipped: chroot needs root"; return 0; fi
  local gw b
  gw=$(gateway_bin)
  [[ -x "$gw" ]] || { kube_log "no allocation-gateway binary at $gw (the image holds both)"; return 1; }
  "$ROOT/scripts/make-rootfs" "$bin" "$gw" "$rootfs" >&2 || return 1
  for b in allocating-webhook allocation-gateway; do
    if ! chroot --userspec=65532:65532 "$rootfs" /usr/local/bin/$b --help >/dev/null 2>&1; then
      kube_log "$b does not run inside the image root"; return 1
    fi
    kube_log "ok: $b --help runs inside the image root as 65532"
  done

  # The certificate as the Secret volume presents it (group 65532 through fsGroup, mode 0440).
  tls="$rootfs/etc/allocating-webhook/tls"
  mkdir -p "$tls"
  "$ROOT/scripts/gen-certs" "$tls" 127.0.0.1 >/dev/null || return 1
  chgrp 65532 "$tls"/tls.crt "$tls"/tls.key && chmod 0440 "$tls"/tls.crt "$tls"/tls.key
  port=$(free_port) health=$(free_port)
  # The Deployment's arguments, with the ports moved to free ones on loopback.
  mapfile -t args < <(rendered_object Deployment | jq -r '.spec.template.spec.containers[0].args[]' |
    sed -e "s/^--port=.*/--port=$port/" -e "s/^--health-port=.*/--health-port=$health/")
  chroot --userspec=65532:65532 "$rootfs" /usr/local/bin/allocating-webhook "${args[@]}" \
    --bind-address=127.0.0.1 >"$WORK/rootfs-run.log" 2>&1 &
  pid=$!
  STARTED_PIDS+=("$pid")
  if retry_until 10 curl -sf -o /dev/null "http://127.0.0.1:$health/readyz"; then
    kube_log "ok: /readyz answers 200 (args: ${args[*]})"
  else
    kube_log "/readyz never answered"; ok=1
  fi
  curl -sf -o /dev/null "http://127.0.0.1:$health/healthz" || { kube_log "/healthz failed"; ok=1; }
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$tls/ca.crt" "https://127.0.0.1:$port/mutate/gameservers")
  assert_eq "HTTPS GET on a webhook path (method not allowed)" 405 "$code" || ok=1
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  ((ok == 0)) || cat "$WORK/rootfs-run.log" >&2
  return $ok
}

# --- RBAC, live ------------------------------------------------------------------------------

LIVE_NS=aw-rbac-live

# start_webhook BINARY TLSDIR LOG: runs the program on free loopback ports as the service account
# (the kubeconfig's `resolver` context). Sets WEBHOOK_PID, WEBHOOK_PORT, WEBHOOK_HEALTH.
start_webhook() {
  "$ROOT/scripts/gen-certs" "$2" 127.0.0.1 >/dev/null || return 1
  WEBHOOK_PORT=$(free_port) WEBHOOK_HEALTH=$(free_port)
  "$1" --port="$WEBHOOK_PORT" --health-port="$WEBHOOK_HEALTH" --bind-address=127.0.0.1 \
    --tls-cert-file="$2/tls.crt" --tls-key-file="$2/tls.key" \
    --trusted-users="$SA_USER" --kubeconfig="$KCFG" --context=resolver \
    --leader-election-namespace=allocating-system --log-format=json >"$3" 2>&1 &
  WEBHOOK_PID=$!
  STARTED_PIDS+=("$WEBHOOK_PID")
}

lease_holder() {
  kc -n allocating-system get lease allocating-webhook -o 'jsonpath={.spec.holderIdentity}' 2>/dev/null
}
has_lease_holder() { [[ -n "$(lease_holder)" ]]; }
gs_confirmed() { [[ "$(gs_annotation "$LIVE_NS" "$1" allocating.agones.dev/outcome)" == Confirmed ]]; }
has_event() {
  kc -n "$LIVE_NS" get events --field-selector "involvedObject.name=$1,reason=$2" \
    -o 'jsonpath={.items[*].reason}' 2>/dev/null | grep -q "$2"
}

check_rbac_live() {
  local bin="${AW_BIN:-$ROOT/build/allocating-webhook}" tls="$WORK/live-tls" pid ok=0
  local name="rbac-live-$RANDOM" id since
  if [[ ! -x "$bin" ]]; then kube_log "skipped: no webhook binary at $bin"; return 0; fi
  if ! kubectl --kubeconfig "$KCFG" config get-contexts resolver >/dev/null 2>&1; then
    kube_log "skipped: no 'resolver' context in $KCFG"; return 0
  fi
  if crd_enum_has_allocating; then
    kube_log "note: the GameServer CRD already lists Allocating; the guard's patch is not exercised"
  fi
  start_webhook "$bin" "$tls" "$WORK/live.log" || return 1
  pid=$WEBHOOK_PID

  if retry_until 30 has_lease_holder; then kube_log "ok: took the Lease (holder $(lease_holder))"
  else kube_log "no Lease holder after 30s"; ok=1; fi
  if retry_until 30 crd_enum_has_allocating; then kube_log "ok: the GameServer CRD lists Allocating"
  else kube_log "the CRD guard did not add Allocating"; ok=1; fi

  # An opted-in server already Allocating whose game server confirmed readiness (no probe).
  kc create namespace "$LIVE_NS" --dry-run=client -o yaml | kc apply -f - >/dev/null
  id="rbac-live-$(date -u +%s%N)"
  since=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
  jq -n --arg ns "$LIVE_NS" --arg name "$name" --arg id "$id" --arg since "$since" '{
    apiVersion: "agones.dev/v1", kind: "GameServer",
    metadata: {name: $name, namespace: $ns,
      labels: {"allocating.agones.dev/enabled": "true"},
      annotations: {"allocating.agones.dev/timeout": "5m", "allocating.agones.dev/since": $since,
        "allocating.agones.dev/allocation": $id, "agones.dev/sdk-allocating-ready": $id}},
    spec: {ports: [{name: "default", containerPort: 7654}],
      template: {spec: {containers: [{name: "game", image: "example/game:1"}]}}},
    status: {state: "Allocating", address: "127.0.0.1",
      ports: [{name: "default", port: 7654}]}}' >"$WORK/live-gs.json"
  if kc create -f "$WORK/live-gs.json" >/dev/null; then
    if retry_until 20 gs_confirmed "$name"; then
      assert_eq "state after confirmation" Allocated "$(gs_state "$LIVE_NS" "$name")" || ok=1
    else
      kube_log "not promoted within 20s (state '$(gs_state "$LIVE_NS" "$name")')"; ok=1
    fi
    if retry_until 10 has_event "$name" AllocatingConfirmed; then kube_log "ok: Event AllocatingConfirmed recorded"
    else kube_log "no AllocatingConfirmed Event"; ok=1; fi
    kc -n "$LIVE_NS" delete gameservers.agones.dev "$name" --wait=false >/dev/null 2>&1
  else
    ok=1
  fi

  if grep -i -E 'forbidden|\b403\b' "$WORK/live.log" >&2; then
    kube_log "the program hit an authorization error (above)"; ok=1
  else
    kube_log "ok: no authorization error in the program's log"
  fi
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  ((ok == 0)) || tail -40 "$WORK/live.log" >&2
  return $ok
}

# --- the example flow --------------------------------------------------------------------------

EXAMPLE_NS=aw-example-flow

# register_local_webhooks CA_FILE PORT [KUSTOMIZATION_DIR]: the webhook configurations of
# manifests/overlays/local (or of the given kustomization) with the CA and the actual port.
register_local_webhooks() {
  kc kustomize "${3:-$ROOT/manifests/overlays/local}" | kc create --dry-run=client -o json -f - |
    jq -c 'if .kind == "List" then .items[] else . end' |
    jq -s --arg ca "$(base64 -w0 <"$1")" --arg port "$2" '{apiVersion: "v1", kind: "List", items: [.[] |
      select(.kind | test("WebhookConfiguration$")) |
      .webhooks |= map(.clientConfig.caBundle = $ca |
        .clientConfig.url |= sub("127\\.0\\.0\\.1:8443/"; "127.0.0.1:" + $port + "/"))]}' |
    kc apply -f - >/dev/null
}

webhook_knows_crd() {
  curl -sf "http://127.0.0.1:$WEBHOOK_HEALTH/metrics" | grep -q '^allocating_webhook_crd_accepts_allocating 1'
}

check_example_flow() {
  local bin="${AW_BIN:-$ROOT/build/allocating-webhook}" tls="$WORK/flow-tls" ok=0 name="example-$RANDOM"
  local echo_pid udp_port gs now id
  if [[ ! -x "$bin" ]]; then kube_log "skipped: no webhook binary at $bin"; return 0; fi
  start_webhook "$bin" "$tls" "$WORK/flow.log" || return 1

  # The game server stand-in: answers every UDP datagram (as Agones' simple-game-server does).
  /usr/bin/python3 -u -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1], flush=True)
while True:
    data, addr = s.recvfrom(2048)
    s.sendto(b"ACK: " + data, addr)
' >"$WORK/udp.port" 2>/dev/null &
  echo_pid=$!
  STARTED_PIDS+=("$echo_pid")
  retry_until 5 test -s "$WORK/udp.port" || { kube_log "UDP echo did not start"; ok=1; }
  udp_port=$(head -n 1 "$WORK/udp.port")

  flow() {
    register_local_webhooks "$tls/ca.crt" "$WEBHOOK_PORT" || { kube_log "cannot register the webhooks"; return 1; }
    retry_until 30 webhook_knows_crd || { kube_log "the webhook never saw the CRD accept Allocating"; return 1; }
    kube_log "ok: webhook registered from overlays/local; the CRD accepts Allocating"
    kc create namespace "$EXAMPLE_NS" --dry-run=client -o yaml | kc apply -f - >/dev/null
    example_gameserver "$EXAMPLE_NS" "$name" >"$WORK/gs.json"
    kc create -f "$WORK/gs.json" >/dev/null || { kube_log "the example GameServer was refused"; return 1; }
    # Agones marks it Ready with its address and port.
    kubectl --kubeconfig "$KCFG" --context agones-controller -n "$EXAMPLE_NS" patch gameservers.agones.dev "$name" \
      --type=merge -p "{\"status\":{\"state\":\"Ready\",\"address\":\"127.0.0.1\",\"ports\":[{\"name\":\"default\",\"port\":$udp_port}]}}" \
      >/dev/null || return 1
    # The allocator: one full UPDATE with state Allocated, agones.dev/last-allocated and the
    # allocation's metadata.
    now=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
    gs=$(kubectl --kubeconfig "$KCFG" --context agones-controller -n "$EXAMPLE_NS" get gameservers.agones.dev "$name" -o json |
      jq --arg now "$now" '.status.state = "Allocated" |
        .metadata.annotations["agones.dev/last-allocated"] = $now |
        .metadata.labels["match"] = "example"')
    kubectl --kubeconfig "$KCFG" --context agones-controller replace -f - <<<"$gs" >/dev/null 2>"$WORK/replace.err" ||
      { kube_log "allocator UPDATE failed: $(cat "$WORK/replace.err")"; return 1; }
    id=$(gs_annotation "$EXAMPLE_NS" "$name" allocating.agones.dev/allocation)
    assert_eq "allocation id = agones.dev/last-allocated" "$now" "$id" || return 1
    use_sdk_identity "$EXAMPLE_NS" || { kube_log "cannot give $EXAMPLE_NS an agones-sdk identity"; return 1; }
    scenario_held_then_confirmed "$EXAMPLE_NS" "$name" "$id"
  }
  flow || ok=1

  kc delete mutatingwebhookconfiguration,validatingwebhookconfiguration allocating-webhook --ignore-not-found >/dev/null
  kc -n "$EXAMPLE_NS" delete gameservers.agones.dev "$name" --ignore-not-found --wait=false >/dev/null 2>&1
  kill -TERM "$WEBHOOK_PID" "$echo_pid" 2>/dev/null
  wait "$WEBHOOK_PID" "$echo_pid" 2>/dev/null
  ((ok == 0)) || tail -40 "$WORK/flow.log" >&2
  return $ok
}

# --- failurePolicy, live ----------------------------------------------------------------------

FP_NS=aw-failure-policy

# label_gs NAME VALUE: an ordinary update of a GameServer (a label), as the admin.
label_gs() {
  kc -n "$FP_NS" label gameservers.agones.dev "$1" --overwrite "aw-touch=$2" >/dev/null 2>"$WORK/fp.err"
}

# apiserver_metric NAME WEBHOOK: the summed value of an apiserver metric for one webhook (0 if none).
apiserver_metric() {
  kc get --raw /metrics | awk -v m="$1" -v w="name=\"$2\"" \
    'index($0, m "{") == 1 && index($0, w) > 0 { s += $NF } END { print s + 0 }'
}

check_failure_policy() {
  local ok=0 tls="$WORK/fp-tls" dead fail_dir opted="fp-opted-$RANDOM" plain="fp-plain-$RANDOM" before after
  "$ROOT/scripts/gen-certs" "$tls" 127.0.0.1 >/dev/null || return 1
  dead=$(free_port)  # nothing listens there: the webhook is "down"
  kc delete mutatingwebhookconfiguration,validatingwebhookconfiguration allocating-webhook --ignore-not-found >/dev/null
  kc create namespace "$FP_NS" --dry-run=client -o yaml | kc apply -f - >/dev/null
  example_gameserver "$FP_NS" "$opted" | kc create -f - >/dev/null || return 1
  example_gameserver "$FP_NS" "$plain" |
    jq 'del(.metadata.labels["allocating.agones.dev/enabled"]) |
        .metadata.annotations |= with_entries(select(.key | startswith("allocating.agones.dev/") | not))' |
    kc create -f - >/dev/null || return 1

  # Base policy (Ignore): the update goes through, kube-apiserver counts the fail-open call.
  register_local_webhooks "$tls/ca.crt" "$dead" || return 1
  before=$(apiserver_metric apiserver_admission_webhook_fail_open_count mutate-gameservers.allocating.agones.dev)
  if label_gs "$opted" ignore; then kube_log "ok: Ignore: the update of an opted-in GameServer went through"
  else kube_log "Ignore: the update was refused: $(cat "$WORK/fp.err")"; ok=1; fi
  after=$(apiserver_metric apiserver_admission_webhook_fail_open_count mutate-gameservers.allocating.agones.dev)
  if ((after > before)); then kube_log "ok: apiserver_admission_webhook_fail_open_count counted it ($before -> $after)"
  else kube_log "apiserver_admission_webhook_fail_open_count did not move ($before -> $after)"; ok=1; fi

  # components/failure-policy-fail: refused, with the API server's error, and counted.
  fail_dir="$WORK/fail-kustomization"
  mkdir -p "$fail_dir"
  local rel
  rel=$(realpath --relative-to="$fail_dir" "$ROOT/manifests")
  printf '%s\n' "apiVersion: kustomize.config.k8s.io/v1beta1" "kind: Kustomization" \
    "resources: [$rel/overlays/local]" "components: [$rel/components/failure-policy-fail]" \
    >"$fail_dir/kustomization.yaml"
  register_local_webhooks "$tls/ca.crt" "$dead" "$fail_dir" || return 1
  before=$(apiserver_metric apiserver_admission_webhook_rejection_count mutate-gameservers.allocating.agones.dev)
  if label_gs "$opted" fail; then
    kube_log "Fail: the update of an opted-in GameServer went through"; ok=1
  elif grep -q 'failed calling webhook' "$WORK/fp.err"; then
    kube_log "ok: Fail: refused ($(grep -o 'failed calling webhook[^:]*' "$WORK/fp.err" | head -n 1))"
  else
    kube_log "Fail: refused for another reason: $(cat "$WORK/fp.err")"; ok=1
  fi
  after=$(apiserver_metric apiserver_admission_webhook_rejection_count mutate-gameservers.allocating.agones.dev)
  if ((after > before)); then kube_log "ok: apiserver_admission_webhook_rejection_count counted it ($before -> $after)"
  else kube_log "apiserver_admission_webhook_rejection_count did not move ($before -> $after)"; ok=1; fi
  if label_gs "$plain" fail; then kube_log "ok: Fail: a GameServer without the opt-in label is not concerned"
  else kube_log "Fail: a GameServer without the label was refused: $(cat "$WORK/fp.err")"; ok=1; fi

  kc delete mutatingwebhookconfiguration,validatingwebhookconfiguration allocating-webhook --ignore-not-found >/dev/null
  kc -n "$FP_NS" delete gameservers.agones.dev "$opted" "$plain" --ignore-not-found --wait=false >/dev/null 2>&1
  return $ok
}

# --- gateway component -------------------------------------------------------------------------

GW_SA_USER=system:serviceaccount:allocating-system:allocation-gateway

# gateway_bin: the allocation-gateway binary ($AW_GATEWAY_BIN, else next to $AW_BIN).
gateway_bin() { echo "${AW_GATEWAY_BIN:-$(dirname "${AW_BIN:-$ROOT/build/allocating-webhook}")/allocation-gateway}"; }

# gateway_objects: the base composed with components/gateway (as docs/gateway.md shows), one JSON
# object per line.
gateway_objects() {
  local dir="$WORK/gw-overlay" base comp
  mkdir -p "$dir"
  base=$(realpath --relative-to="$dir" "$ROOT/manifests/base")
  comp=$(realpath --relative-to="$dir" "$ROOT/manifests/components/gateway")
  printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\ncomponents:\n  - %s\n' \
    "$base" "$comp" >"$dir/kustomization.yaml"
  kc kustomize "$dir" | kc create --dry-run=client -o json -f - |
    jq -c 'if .kind == "List" then .items[] else . end'
}

# can_gw EXPECT VERB RESOURCE [ARGS...]: kubectl auth can-i as the gateway's service account.
can_gw() {
  local expect="$1" got; shift
  got=$(kc auth can-i --as="$GW_SA_USER" "$@" 2>/dev/null)
  [[ -n "$got" ]] || got=no
  if [[ "$got" == "$expect" ]]; then kube_log "ok: gateway can-i $* = $got"
  else kube_log "RBAC: gateway can-i $* = $got, want $expect"; return 1; fi
}

check_gateway() {
  local ok=0 objs dep base_dep gw help a flag
  gw=$(gateway_bin)
  [[ -x "$gw" ]] || { kube_log "no allocation-gateway binary at $gw"; return 1; }
  objs=$(gateway_objects) || { kube_log "render failed: base + components/gateway"; return 1; }
  local kind
  for kind in ServiceAccount ClusterRole ClusterRoleBinding Service Deployment PodDisruptionBudget; do
    assert_eq "$kind allocation-gateway rendered" 1 \
      "$(jq -s --arg k "$kind" '[.[] | select(.kind == $k and .metadata.name == "allocation-gateway")] | length' <<<"$objs")" || ok=1
  done
  dep=$(jq -c 'select(.kind == "Deployment" and .metadata.name == "allocation-gateway")' <<<"$objs")
  base_dep=$(jq -c 'select(.kind == "Deployment" and .metadata.name == "allocating-webhook")' <<<"$objs")
  assert_eq "gateway command" '["/usr/local/bin/allocation-gateway"]' "$(jq -c '.spec.template.spec.containers[0].command' <<<"$dep")" || ok=1
  # One image, two binaries: the component must not name another tag than the base's webhook (on
  # a real node the gateway pulled allocating-webhook:latest while the webhook ran :dev).
  assert_eq "gateway image = the webhook's" "$(jq -r '.spec.template.spec.containers[0].image' <<<"$base_dep")" \
    "$(jq -r '.spec.template.spec.containers[0].image' <<<"$dep")" || ok=1
  help=$("$gw" --help 2>&1)
  while read -r a; do
    flag="${a%%=*}"
    grep -qE "^  ${flag}\$" <<<"$help" || { kube_log "gateway arg $a is not a flag of allocation-gateway --help"; ok=1; }
  done < <(jq -r '.spec.template.spec.containers[0].args[]' <<<"$dep")
  assert_eq "gateway container securityContext = the webhook's" \
    "$(jq -cS '.spec.template.spec.containers[0].securityContext' <<<"$base_dep")" \
    "$(jq -cS '.spec.template.spec.containers[0].securityContext' <<<"$dep")" || ok=1
  assert_eq "gateway pod securityContext = the webhook's" \
    "$(jq -cS '.spec.template.spec.securityContext' <<<"$base_dep")" "$(jq -cS '.spec.template.spec.securityContext' <<<"$dep")" || ok=1
  assert_eq "gateway Secrets" "allocation-gateway-allocator-client,allocation-gateway-client-ca,allocation-gateway-tls" \
    "$(jq -r '[.spec.template.spec.volumes[] | select(.secret) | .secret.secretName] | sort | join(",")' <<<"$dep")" || ok=1
  # Every file argument lies under a mounted volume.
  while read -r a; do
    jq -e --arg f "$a" '[.spec.template.spec.containers[0].volumeMounts[].mountPath] | any(. as $m | $f | startswith($m + "/"))' \
      <<<"$dep" >/dev/null || { kube_log "gateway file $a is on no mounted volume"; ok=1; }
  done < <(jq -r '.spec.template.spec.containers[0].args[] | select(test("-file=")) | sub("^[^=]*="; "")' <<<"$dep")
  assert_eq "gateway Service targets the https port" https \
    "$(jq -r 'select(.kind == "Service" and .metadata.name == "allocation-gateway") | .spec.ports[0].targetPort' <<<"$objs")" || ok=1
  assert_eq "gateway Service and PDB select the gateway pods (not the webhook's)" \
    '{"app.kubernetes.io/name":"allocation-gateway"}|{"app.kubernetes.io/name":"allocation-gateway"}' \
    "$(jq -sc '[.[] | select(.metadata.name == "allocation-gateway") | select(.kind == "Service") | .spec.selector][0] | tostring' <<<"$objs" | jq -r .)|$(jq -sc '[.[] | select(.metadata.name == "allocation-gateway" and .kind == "PodDisruptionBudget") | .spec.selector.matchLabels][0] | tostring' <<<"$objs" | jq -r .)" || ok=1

  # The API server accepts the composition (strict field validation, no warning), also with the
  # gateway's certificate from cert-manager (overlays/cert-manager + components/gateway-cert-manager,
  # against the stub CRDs).
  dry_run_apply "$WORK/gw-overlay" || ok=1
  local cmdir="$WORK/gw-cm-overlay"
  mkdir -p "$cmdir"
  printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\ncomponents:\n  - %s\n  - %s\n' \
    "$(realpath --relative-to="$cmdir" "$ROOT/manifests/overlays/cert-manager")" \
    "$(realpath --relative-to="$cmdir" "$ROOT/manifests/components/gateway")" \
    "$(realpath --relative-to="$cmdir" "$ROOT/manifests/components/gateway-cert-manager")" >"$cmdir/kustomization.yaml"
  if install_cert_manager_stubs; then
    dry_run_apply "$cmdir" || ok=1
    local cert
    cert=$(kc kustomize "$cmdir" | kc create --dry-run=client -o json -f - |
      jq -c '(if .kind == "List" then .items[] else . end) | select(.kind == "Certificate" and .metadata.name == "allocation-gateway-serving")')
    assert_eq "gateway Certificate writes the Secret the Deployment mounts" allocation-gateway-tls "$(jq -r .spec.secretName <<<"$cert")" || ok=1
    assert_eq "gateway Certificate issued by the overlay's CA Issuer" allocating-webhook-ca "$(jq -r .spec.issuerRef.name <<<"$cert")" || ok=1
    assert_eq "gateway Certificate names its Service" allocation-gateway.allocating-system.svc "$(jq -r '.spec.dnsNames[0]' <<<"$cert")" || ok=1
  else
    kube_log "cannot install the cert-manager stub CRDs"; ok=1
  fi

  # Pod Security "restricted": the gateway's pod is admitted with no warning.
  ensure_namespace "$PSA_NS" pod-security.kubernetes.io/enforce=restricted \
    pod-security.kubernetes.io/enforce-version=latest pod-security.kubernetes.io/warn=restricted || return 1
  kc -n "$PSA_NS" create serviceaccount allocation-gateway --dry-run=client -o yaml | kc apply -f - >/dev/null || return 1
  jq --arg ns "$PSA_NS" '{apiVersion: "v1", kind: "Pod",
      metadata: {name: "allocation-gateway-psa", namespace: $ns, labels: .spec.template.metadata.labels},
      spec: .spec.template.spec}' <<<"$dep" >"$WORK/gw-pod.json"
  if kc create --dry-run=server -f "$WORK/gw-pod.json" >/dev/null 2>"$WORK/gw-pod.err" && ! grep -qi warning "$WORK/gw-pod.err"; then
    kube_log "ok: the gateway's pod is admitted under enforce=restricted with no warning"
  else
    kube_log "the gateway's pod is not clean under restricted:"; cat "$WORK/gw-pod.err" >&2; ok=1
  fi

  # RBAC: read GameServers and patch them (the delivery marks), nothing else.
  jq -s '{apiVersion: "v1", kind: "List", items: [.[] | select(.kind == "Namespace" or
      (.metadata.name == "allocation-gateway" and (.kind | test("^(ServiceAccount|ClusterRole|ClusterRoleBinding)$"))))]}' \
    <<<"$objs" >"$WORK/gw-rbac.json"
  kc apply -f "$WORK/gw-rbac.json" >/dev/null || { kube_log "cannot apply the gateway's RBAC"; return 1; }
  local v
  for v in get list watch patch; do can_gw yes "$v" gameservers.agones.dev --all-namespaces || ok=1; done
  for v in create update delete; do can_gw no "$v" gameservers.agones.dev -n default || ok=1; done
  can_gw no create gameserverallocations.allocation.agones.dev -n default || ok=1
  can_gw no get secrets -n allocating-system || ok=1
  can_gw no list fleets.agones.dev -n default || ok=1
  can_gw no create events -n default || ok=1
  can_gw no update leases.coordination.k8s.io -n allocating-system || ok=1

  # Live: the binary with the Deployment's arguments (files under a local directory, free loopback
  # ports), as the gateway's service account (a TokenRequest token), its serving certificate from
  # install-certs --gateway: its informer syncs with only that RBAC, a matchmaker with a client
  # certificate gets an answer, one without is refused.
  local d="$WORK/gw-live" token server port health pid code
  mkdir -p "$d/tls" "$d/client-ca" "$d/allocator"
  "$ROOT/certs/install-certs" --kubeconfig "$KCFG" "${ADMIN_CONTEXT[@]}" --gateway --dir "$d/certs" --san 127.0.0.1 >&2 ||
    { kube_log "install-certs --gateway failed"; return 1; }
  for v in tls.crt tls.key ca.crt; do
    kc -n allocating-system get secret allocation-gateway-tls -o "jsonpath={.data.${v//./\\.}}" | base64 -d >"$d/tls/$v"
  done
  openssl verify -CAfile "$d/tls/ca.crt" "$d/tls/tls.crt" >/dev/null 2>&1 ||
    { kube_log "the Secret allocation-gateway-tls does not hold a chain that verifies"; ok=1; }
  openssl x509 -noout -ext subjectAltName -in "$d/tls/tls.crt" | grep -q 'DNS:allocation-gateway.allocating-system.svc' ||
    { kube_log "the gateway certificate does not name allocation-gateway.allocating-system.svc"; ok=1; }
  gateway_client_cert "$d" || { kube_log "cannot make a client certificate"; return 1; }
  cp "$d/client-ca.crt" "$d/client-ca/ca.crt"
  token=$(kc -n allocating-system create token allocation-gateway --duration=10m) || { kube_log "no token for the gateway"; return 1; }
  server=$(kc config view --raw --minify -o 'jsonpath={.clusters[0].cluster.server}')
  kc config view --raw --minify -o 'jsonpath={.clusters[0].cluster.certificate-authority-data}' | base64 -d >"$d/apiserver-ca.crt"
  printf 'apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "%s", certificate-authority: "%s"}}]\nusers: [{name: gw, user: {token: "%s"}}]\ncontexts: [{name: gw, context: {cluster: c, user: gw}}]\ncurrent-context: gw\n' \
    "$server" "$d/apiserver-ca.crt" "$token" >"$d/kubeconfig"
  port=$(free_port) health=$(free_port)
  local args=()
  mapfile -t args < <(jq -r '.spec.template.spec.containers[0].args[]' <<<"$dep" |
    sed -e "s/^--port=.*/--port=$port/" -e "s/^--health-port=.*/--health-port=$health/" \
        -e "s#/etc/allocation-gateway/#$d/#" -e "s#^--allocator-address=.*#--allocator-address=https://127.0.0.1:$(free_port)#" |
    grep -v -e '^--allocator-client-' -e '^--allocator-ca-file=')
  "$gw" "${args[@]}" --bind-address=127.0.0.1 --kubeconfig="$d/kubeconfig" --allocator-timeout=2s >"$WORK/gw-run.log" 2>&1 &
  pid=$!
  STARTED_PIDS+=("$pid")
  if retry_until 20 curl -sf -o /dev/null "http://127.0.0.1:$health/readyz"; then
    kube_log "ok: the gateway is ready as its service account (GameServer informer synced; args: ${args[*]})"
  else
    kube_log "the gateway never became ready"; ok=1
  fi
  if grep -qi forbidden "$WORK/gw-run.log"; then kube_log "the gateway's log has a forbidden request"; ok=1; fi
  code=$(curl -s -o "$WORK/gw-body" -w '%{http_code}' --cacert "$d/tls/ca.crt" --cert "$d/client.crt" --key "$d/client.key" \
    -H 'Content-Type: application/json' --data '{not json' "https://127.0.0.1:$port/gameserverallocation")
  assert_eq "a matchmaker with a client certificate: malformed request" 400 "$code" || ok=1
  code=$(curl -s -o "$WORK/gw-body" -w '%{http_code}' --cacert "$d/tls/ca.crt" --cert "$d/client.crt" --key "$d/client.key" \
    -H 'Content-Type: application/json' --data '{"namespace":"default"}' "https://127.0.0.1:$port/gameserverallocation")
  assert_eq "a matchmaker with a client certificate: agones-allocator unreachable" 503 "$code" || ok=1
  if curl -s -o /dev/null --cacert "$d/tls/ca.crt" -H 'Content-Type: application/json' --data '{}' \
    "https://127.0.0.1:$port/gameserverallocation"; then
    kube_log "a client without a certificate got an answer"; ok=1
  else
    kube_log "ok: a client without a certificate is refused at the handshake"
  fi
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  ((ok == 0)) || tail -20 "$WORK/gw-run.log" >&2
  return $ok
}

command -v jq >/dev/null || { echo "manifests check: jq is required" >&2; exit 1; }
check render check_render
check dry-run check_dry_run
check pod-security check_pod_security
check rbac check_rbac
check install-certs check_install_certs
check image-rootfs check_image_rootfs
check rbac-live check_rbac_live
check example-flow check_example_flow
check failure-policy check_failure_policy
check gateway check_gateway
kube_log "manifests checks: $passed passed, $failed failed${failures[*]:+ (${failures[*]})}"
((failed == 0 && passed > 0))
