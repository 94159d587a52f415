// Package scenarios runs the webhook (admission only: no kubeconfig, so no resolver and no CRD
// guard) behind a real kube-apiserver, registered with the webhook configurations of manifests/, and
// plays the writes Agones, the SDK, the resolver and people make (issue 3, scenarios 1-10).
package scenarios

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/agones-allocating-webhook/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

type env struct {
	cp  *harness.ControlPlane
	ns  string
	wh  *harness.Webhook
	sdk *harness.SDK // the namespace's own SDK identity (service account agones-sdk)
}

// gate: the GameServer CRD accepts Allocating, one webhook runs and is registered (manifests'
// failurePolicy unless given), and a fresh namespace.
func gate(t *testing.T, reg harness.RegisterOptions) env {
	t.Helper()
	cp := harness.Setup(t)
	cp.AddAllocatingToEnum(t)
	wh := cp.StartWebhook(t, harness.WebhookOptions{Args: []string{"--crd-accepts-allocating=true"}})
	cp.RegisterWebhooks(t, wh, reg)
	ns := cp.Namespace(t)
	return env{cp: cp, ns: ns, wh: wh, sdk: cp.SDK(t, ns)}
}

func (e env) ready(t *testing.T, name string, optIn bool, annotations ...string) *unstructured.Unstructured {
	t.Helper()
	return e.cp.CreateReadyGameServer(t, e.ns, harness.NewGameServer(name, optIn, annotations...))
}

// allocating brings an opted-in server to Allocating the way the allocator does.
func (e env) allocating(t *testing.T, name string, annotations ...string) *unstructured.Unstructured {
	t.Helper()
	e.ready(t, name, true, annotations...)
	got, err := harness.AllocateLikeAgones(harness.Ctx(t), e.cp.Dynamic(t, harness.AgonesController), e.ns, name, nil, nil)
	if err != nil {
		t.Fatalf("allocate %s: %v", name, err)
	}
	if harness.State(got) != "Allocating" {
		t.Fatalf("allocate %s: want Allocating, got %s", name, harness.Describe(got))
	}
	return got
}

func requestsTotal(t *testing.T, wh *harness.Webhook) float64 {
	t.Helper()
	var sum float64
	for _, line := range strings.Split(wh.Metrics(t), "\n") {
		if !strings.HasPrefix(line, "allocating_webhook_admission_requests_total") {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

func wantErrContains(t *testing.T, err error, what string, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: succeeded, want an error containing %q", what, subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("%s: error %q does not contain %q", what, err.Error(), s)
		}
	}
}

func noOwnedAnnotations(t *testing.T, gs *unstructured.Unstructured) {
	t.Helper()
	for _, k := range []string{harness.SinceKey, harness.AllocationKey, harness.ConfirmedKey, harness.OutcomeKey} {
		if harness.HasAnnotation(gs, k) {
			t.Errorf("%s carries %s", harness.Describe(gs), k)
		}
	}
}

func parseRFC3339Nano(t *testing.T, what, v string) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		t.Fatalf("%s %q is not RFC 3339: %v", what, v, err)
	}
	return ts
}

// 1. A GameServer without the opt-in label is never touched (the objectSelector keeps it away
// from the webhook: not a single admission request reaches it).
func TestScenario01_NotOptedInIsNeverTouched(t *testing.T) {
	e := gate(t, harness.RegisterOptions{FailurePolicy: "Fail"})
	before := requestsTotal(t, e.wh)
	e.ready(t, "plain", false, harness.ModeKey, "reject", harness.TimeoutKey, "not-a-duration")
	got, err := harness.AllocateLikeAgones(harness.Ctx(t), e.cp.Dynamic(t, harness.AgonesController), e.ns, "plain",
		map[string]string{"match": "m1"}, map[string]string{"map": "dust"})
	if err != nil {
		t.Fatalf("allocate: %v", err)
	}
	if harness.State(got) != "Allocated" {
		t.Fatalf("want Allocated, got %s", harness.Describe(got))
	}
	noOwnedAnnotations(t, got)
	if _, err := harness.SDKSetState(harness.Ctx(t), e.sdk.Dyn, e.ns, "plain", "Shutdown"); err != nil {
		t.Fatalf("SDK shutdown: %v", err)
	}
	if after := requestsTotal(t, e.wh); after != before {
		t.Fatalf("the webhook saw %v admission requests for a GameServer without the label", after-before)
	}
}

// 2. An allocator-style full UPDATE Ready -> Allocated (with agones.dev/last-allocated and the
// allocation's metadata) ends as Allocating with since and allocation; the stored object shows it.
func TestScenario02_AllocatorUpdateBecomesAllocating(t *testing.T) {
	e := gate(t, harness.RegisterOptions{})
	e.ready(t, "gs", true)
	start := time.Now()
	got, err := harness.AllocateLikeAgones(harness.Ctx(t), e.cp.Dynamic(t, harness.AgonesController), e.ns, "gs",
		map[string]string{"match": "m-42"}, map[string]string{"map": "dust2"})
	if err != nil {
		t.Fatalf("allocate: %v", err)
	}
	stored := e.cp.GetGameServer(t, e.ns, "gs")
	for what, gs := range map[string]*unstructured.Unstructured{"response": got, "stored": stored} {
		if harness.State(gs) != "Allocating" {
			t.Fatalf("%s: want Allocating, got %s", what, harness.Describe(gs))
		}
		last := harness.Annotation(gs, harness.LastAllocatedKey)
		if last == "" || harness.Annotation(gs, harness.AllocationKey) != last {
			t.Errorf("%s: allocation %q, want last-allocated %q", what, harness.Annotation(gs, harness.AllocationKey), last)
		}
		since := parseRFC3339Nano(t, what+" since", harness.Annotation(gs, harness.SinceKey))
		if since.Before(start.Add(-5*time.Second)) || since.After(time.Now().Add(5*time.Second)) {
			t.Errorf("%s: since %v is not about now (%v)", what, since, start)
		}
		if gs.GetLabels()["match"] != "m-42" || harness.Annotation(gs, "map") != "dust2" {
			t.Errorf("%s: allocation metadata lost: %s", what, harness.Describe(gs))
		}
		if harness.HasAnnotation(gs, harness.ConfirmedKey) || harness.HasAnnotation(gs, harness.OutcomeKey) {
			t.Errorf("%s: carries confirmed/outcome: %s", what, harness.Describe(gs))
		}
	}
	// Watchers can wait for Allocated: kubectl's jsonpath wait times out while it is Allocating.
	_, se, err := e.cp.Kubectl(harness.Admin, "", "-n", e.ns, "wait", "--for=jsonpath={.status.state}=Allocated", "gameserver/gs", "--timeout=1s")
	if err == nil {
		t.Errorf("kubectl wait for Allocated succeeded on an Allocating server (%s)", se)
	}
}

// 3. An SDK-style JSON patch (test of resourceVersion, then replace of /status/state) does the same.
// The SDK's Allocate() sets agones.dev/last-allocated in the same patch (as the sidecar does), so
// the allocation id is that; a write of Allocated without it (kubectl) gets `since` as the id.
func TestScenario03_SDKPatchBecomesAllocating(t *testing.T) {
	e := gate(t, harness.RegisterOptions{})
	e.ready(t, "gs", true)
	got, err := harness.SDKSetState(harness.Ctx(t), e.sdk.Dyn, e.ns, "gs", "Allocated")
	if err != nil {
		t.Fatalf("SDK allocate: %v", err)
	}
	stored := e.cp.GetGameServer(t, e.ns, "gs")
	for what, gs := range map[string]*unstructured.Unstructured{"response": got, "stored": stored} {
		if harness.State(gs) != "Allocating" {
			t.Fatalf("%s: want Allocating, got %s", what, harness.Describe(gs))
		}
		parseRFC3339Nano(t, what+" since", harness.Annotation(gs, harness.SinceKey))
		last := harness.Annotation(gs, harness.LastAllocatedKey)
		parseRFC3339Nano(t, what+" last-allocated", last)
		if harness.Annotation(gs, harness.AllocationKey) != last {
			t.Errorf("%s: allocation %q, want last-allocated %q", what, harness.Annotation(gs, harness.AllocationKey), last)
		}
	}
	// Allocated written without agones.dev/last-allocated: the allocation id is `since`.
	e.ready(t, "plain-patch", true)
	e.cp.MustKubectl(t, harness.User, "", "-n", e.ns, "patch", "gameserver/plain-patch", "--type=merge",
		"-p", `{"status":{"state":"Allocated"}}`)
	gs := e.cp.GetGameServer(t, e.ns, "plain-patch")
	if harness.State(gs) != "Allocating" || harness.Annotation(gs, harness.AllocationKey) != harness.Annotation(gs, harness.SinceKey) {
		t.Errorf("Allocated without last-allocated: want Allocating with allocation = since: %s", harness.Describe(gs))
	}
	// The SDK's patch with a stale resourceVersion still fails the test op (the webhook does not
	// break optimistic concurrency).
	body, _ := json.Marshal([]map[string]interface{}{
		{"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
		{"op": "replace", "path": "/status/state", "value": "Ready"},
	})
	_, err = e.sdk.Dyn.Resource(harness.GameServerGVR).Namespace(e.ns).
		Patch(harness.Ctx(t), "gs", types.JSONPatchType, body, metav1.PatchOptions{})
	if err == nil {
		t.Error("a JSON patch with a stale resourceVersion test was applied")
	}
}

// promote is the resolver's write: a JSON patch that tests resourceVersion, sets confirmed to the
// allocation id, outcome Confirmed and state Allocated.
func promote(ctx context.Context, e env, dyn dynamic.Interface, name, confirmed string) (*unstructured.Unstructured, error) {
	return harness.SDKPatch(ctx, dyn, e.ns, name,
		map[string]interface{}{"op": "add", "path": "/metadata/annotations/" + harness.EscapeJSONPointer(harness.ConfirmedKey), "value": confirmed},
		map[string]interface{}{"op": "add", "path": "/metadata/annotations/" + harness.EscapeJSONPointer(harness.OutcomeKey), "value": "Confirmed"},
		map[string]interface{}{"op": "replace", "path": "/status/state", "value": "Allocated"})
}

// 4. An untrusted Allocating -> Allocated is stored as Allocating; the trusted identity with
// confirmed == allocation gets Allocated.
func TestScenario04_OnlyTrustedConfirmedPromotion(t *testing.T) {
	e := gate(t, harness.RegisterOptions{})
	gs := e.allocating(t, "gs")
	allocation := harness.Annotation(gs, harness.AllocationKey)

	// The SDK (game server) and the allocator writing Allocated again: both stay Allocating.
	if got, err := harness.SDKSetState(harness.Ctx(t), e.sdk.Dyn, e.ns, "gs", "Allocated"); err != nil {
		t.Fatalf("SDK Allocated: %v", err)
	} else if harness.State(got) != "Allocating" {
		t.Fatalf("SDK Allocating->Allocated stored %s", harness.Describe(got))
	}
	if got, err := harness.AllocateLikeAgones(harness.Ctx(t), e.cp.Dynamic(t, harness.AgonesController), e.ns, "gs", nil, nil); err != nil {
		t.Fatalf("re-allocate: %v", err)
	} else if harness.State(got) != "Allocating" {
		t.Fatalf("allocator Allocating->Allocated stored %s", harness.Describe(got))
	}
	if s := harness.State(e.cp.GetGameServer(t, e.ns, "gs")); s != "Allocating" {
		t.Fatalf("stored state %q after untrusted writes", s)
	}
	// The trusted identity without confirmed: still Allocating.
	if got, err := harness.SDKSetState(harness.Ctx(t), e.cp.Dynamic(t, harness.Resolver), e.ns, "gs", "Allocated"); err != nil {
		t.Fatalf("resolver without confirmed: %v", err)
	} else if harness.State(got) != "Allocating" {
		t.Fatalf("resolver without confirmed stored %s", harness.Describe(got))
	}
	// The trusted identity with confirmed == allocation: Allocated.
	allocation = harness.Annotation(e.cp.GetGameServer(t, e.ns, "gs"), harness.AllocationKey)
	got, err := promote(harness.Ctx(t), e, e.cp.Dynamic(t, harness.Resolver2), "gs", allocation)
	if err != nil {
		t.Fatalf("resolver promotion: %v", err)
	}
	stored := e.cp.GetGameServer(t, e.ns, "gs")
	if harness.State(got) != "Allocated" || harness.State(stored) != "Allocated" {
		t.Fatalf("trusted promotion: response %s, stored %s", harness.Describe(got), harness.Describe(stored))
	}
	if harness.Annotation(stored, harness.ConfirmedKey) != allocation {
		t.Errorf("confirmed %q, want %q", harness.Annotation(stored, harness.ConfirmedKey), allocation)
	}
}

// 5. mode: reject returns the webhook's denial message to the client; nothing is stored.
func TestScenario05_RejectModeDenies(t *testing.T) {
	e := gate(t, harness.RegisterOptions{})
	e.ready(t, "gs", true, harness.ModeKey, "reject")
	_, err := harness.AllocateLikeAgones(harness.Ctx(t), e.cp.Dynamic(t, harness.AgonesController), e.ns, "gs", nil, nil)
	wantErrContains(t, err, "allocation in reject mode", `admission webhook "mutate-gameservers.allocating.agones.dev" denied the request`, "reject")
	if s := harness.State(e.cp.GetGameServer(t, e.ns, "gs")); s != "Ready" {
		t.Fatalf("stored state %q after a denied allocation, want Ready", s)
	}
	// The same through kubectl (what an operator sees).
	_, se, err := e.cp.Kubectl(harness.User, "", "-n", e.ns, "patch", "gameserver/gs", "--type=merge",
		"-p", `{"status":{"state":"Allocated"}}`)
	if err == nil || !strings.Contains(se, "denied the request") {
		t.Fatalf("kubectl patch in reject mode: err=%v stderr=%s", err, se)
	}
}

// 6. Invalid configuration annotations on a GameServer and in a Fleet template are refused at
// create/apply, with the key named.
func TestScenario06_InvalidConfigurationRefused(t *testing.T) {
	e := gate(t, harness.RegisterOptions{})
	dyn := e.cp.Dynamic(t, harness.User).Resource(harness.GameServerGVR).Namespace(e.ns)
	cases := []struct{ key, value string }{
		{harness.TimeoutKey, "soon"},
		{harness.TimeoutKey, "10h"},
		{harness.OnTimeoutKey, "Explode"},
		{harness.ModeKey, "maybe"},
		{harness.ProbeTypeKey, "icmp"},
		{harness.ProbePortKey, "70000"},
	}
	for _, c := range cases {
		_, err := dyn.Create(harness.Ctx(t), harness.NewGameServer("bad", true, harness.ProbePortKey, "default", c.key, c.value), metav1.CreateOptions{})
		wantErrContains(t, err, "GameServer "+c.key+"="+c.value, "denied the request", c.key)
	}
	// A configuration that can never confirm (no readiness annotation, no probe).
	_, err := dyn.Create(harness.Ctx(t), harness.NewGameServer("never", true, harness.RequireAnnotation, "false"), metav1.CreateOptions{})
	wantErrContains(t, err, "never-confirming GameServer", "denied the request", harness.RequireAnnotation)

	// A Fleet template, through kubectl apply (what users run).
	fleet := harness.NewFleet("fleet", 2, map[string]string{harness.EnabledLabel: "true"},
		map[string]string{harness.OnTimeoutKey: "Sometimes"})
	body, _ := json.Marshal(fleet.Object)
	_, se, err := e.cp.Kubectl(harness.User, string(body), "-n", e.ns, "apply", "-f", "-")
	if err == nil || !strings.Contains(se, harness.OnTimeoutKey) || !strings.Contains(se, "denied the request") {
		t.Fatalf("kubectl apply of a Fleet with a bad template: err=%v stderr=%s", err, se)
	}
	// A valid Fleet applies; making its template invalid later is refused too.
	fleet = harness.NewFleet("fleet", 2, map[string]string{harness.EnabledLabel: "true"},
		map[string]string{harness.TimeoutKey: "45s"})
	body, _ = json.Marshal(fleet.Object)
	e.cp.MustKubectl(t, harness.User, string(body), "-n", e.ns, "apply", "-f", "-")
	_, se, err = e.cp.Kubectl(harness.User, "", "-n", e.ns, "patch", "fleet/fleet", "--type=merge",
		"-p", `{"spec":{"template":{"metadata":{"annotations":{"`+harness.TimeoutKey+`":"forever"}}}}}`)
	if err == nil || !strings.Contains(se, harness.TimeoutKey) {
		t.Fatalf("patching a Fleet template to an invalid timeout: err=%v stderr=%s", err, se)
	}
}

// 7. Scale-down (issue 9, defect 3; issue 24): the GameServerSet controller's Shutdown UPDATE of
// an Allocating server always succeeds (a denial would abort Agones' pass). By default it is applied,
// with outcome ScaledDown (a held server would stall a rolling update); with on-scale-down: Hold the
// server stays Allocating, with a warning, and the SDK shuts it down at once.
func TestScenario07_ScaleDown(t *testing.T) {
	e := gate(t, harness.RegisterOptions{})
	e.allocating(t, "abandoned")
	ctrl, warnings := e.cp.DynamicWithWarnings(t, harness.AgonesController)
	got, err := harness.ShutdownLikeGameServerSet(harness.Ctx(t), ctrl, e.ns, "abandoned", "")
	if err != nil {
		t.Fatalf("the controller's Shutdown of an Allocating server failed: %v", err)
	}
	if harness.State(got) != "Shutdown" || harness.Annotation(got, harness.OutcomeKey) != "ScaledDown" {
		t.Fatalf("the controller's Shutdown answered %s, want Shutdown with outcome ScaledDown", harness.Describe(got))
	}
	e.allocating(t, "gs", harness.OnScaleDownKey, "Hold")
	got, err = harness.ShutdownLikeGameServerSet(harness.Ctx(t), ctrl, e.ns, "gs", "")
	if err != nil {
		t.Fatalf("the controller's Shutdown of an Allocating server failed: %v", err)
	}
	if harness.State(got) != "Allocating" {
		t.Fatalf("on-scale-down Hold: the controller's Shutdown answered %s, want Allocating", harness.Describe(got))
	}
	if s := harness.State(e.cp.GetGameServer(t, e.ns, "gs")); s != "Allocating" {
		t.Fatalf("stored state %q after the controller's Shutdown", s)
	}
	if len(warnings.All()) == 0 {
		t.Error("no warning for the held Shutdown")
	}
	got, err = harness.SDKSetState(harness.Ctx(t), e.sdk.Dyn, e.ns, "gs", "Shutdown")
	if err != nil {
		t.Fatalf("SDK Shutdown of an Allocating server: %v", err)
	}
	if harness.State(got) != "Shutdown" {
		t.Fatalf("SDK Shutdown stored %s", harness.Describe(got))
	}
	noOwnedAnnotations(t, got)
	// A Ready (not Allocating) opted-in server is the controller's to shut down.
	e.ready(t, "idle", true)
	got, err = harness.ShutdownLikeGameServerSet(harness.Ctx(t), ctrl, e.ns, "idle", "")
	if err != nil || harness.State(got) != "Shutdown" {
		t.Fatalf("controller Shutdown of a Ready server: %v %s", err, harness.Describe(got))
	}
}

// 8. With the stock enum (no Allocating) an allocation still succeeds as Allocated and the client
// sees the webhook's warning.
func TestScenario08_StockEnumFailsOpenWithWarning(t *testing.T) {
	cp := harness.Setup(t)
	cp.ResetStockCRD(t)
	wh := cp.StartWebhook(t, harness.WebhookOptions{Args: []string{"--crd-accepts-allocating=false"}})
	cp.RegisterWebhooks(t, wh, harness.RegisterOptions{FailurePolicy: "Fail"})
	ns := cp.Namespace(t)
	e := env{cp: cp, ns: ns, wh: wh, sdk: cp.SDK(t, ns)}
	e.ready(t, "gs", true)
	dyn, warnings := cp.DynamicWithWarnings(t, harness.AgonesController)
	got, err := harness.AllocateLikeAgones(harness.Ctx(t), dyn, e.ns, "gs", nil, nil)
	if err != nil {
		t.Fatalf("allocation with the stock enum failed: %v", err)
	}
	if harness.State(got) != "Allocated" || harness.State(cp.GetGameServer(t, e.ns, "gs")) != "Allocated" {
		t.Fatalf("want Allocated, got %s", harness.Describe(got))
	}
	if !warnings.Contains("Allocating") {
		t.Fatalf("no webhook warning about the CRD enum reached the client; warnings: %q", warnings.All())
	}
	// kubectl prints it too (a person's write on a second server).
	e.ready(t, "gs2", true)
	_, se, err := e.cp.Kubectl(harness.User, "", "-n", e.ns, "patch", "gameserver/gs2", "--type=merge",
		"-p", `{"status":{"state":"Allocated"}}`)
	if err != nil || !strings.Contains(se, "Warning:") || !strings.Contains(se, "Allocating") {
		t.Fatalf("kubectl patch with the stock enum: err=%v stderr=%q", err, se)
	}
	if s := harness.State(cp.GetGameServer(t, e.ns, "gs2")); s != "Allocated" {
		t.Fatalf("gs2 state %q, want Allocated", s)
	}
	if !strings.Contains(wh.Metrics(t), "allocating_webhook_fail_open_total") {
		t.Error("no allocating_webhook_fail_open_total metric")
	}
}

// 9. With the webhook process stopped, failurePolicy Fail refuses opted-in updates with the API
// server's error, and Ignore lets them through (ungated: Allocated).
func TestScenario09_FailurePolicyWithWebhookDown(t *testing.T) {
	e := gate(t, harness.RegisterOptions{FailurePolicy: "Fail"})
	e.ready(t, "gs", true)
	e.ready(t, "plain", false)
	if err := e.wh.Stop(syscall.SIGTERM); err != nil {
		t.Logf("webhook exit after SIGTERM: %v", err)
	}
	ctrl := e.cp.Dynamic(t, harness.AgonesController)
	_, err := harness.AllocateLikeAgones(harness.Ctx(t), ctrl, e.ns, "gs", nil, nil)
	wantErrContains(t, err, "allocation with failurePolicy Fail and no webhook", "failed calling webhook", "mutate-gameservers.allocating.agones.dev")
	if s := harness.State(e.cp.GetGameServer(t, e.ns, "gs")); s != "Ready" {
		t.Fatalf("stored state %q, want Ready", s)
	}
	// Servers that did not opt in are unaffected even with Fail.
	if _, err := harness.AllocateLikeAgones(harness.Ctx(t), ctrl, e.ns, "plain", nil, nil); err != nil {
		t.Fatalf("not opted-in allocation with the webhook down: %v", err)
	}

	e.cp.RegisterWebhooksAt(t, e.wh.Port, e.wh.CAFile, harness.RegisterOptions{FailurePolicy: "Ignore", NoWait: true})
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := harness.AllocateLikeAgones(harness.Ctx(t), ctrl, e.ns, "gs", nil, nil)
		if err == nil {
			if harness.State(got) != "Allocated" {
				t.Fatalf("with Ignore and no webhook: %s, want Allocated (ungated)", harness.Describe(got))
			}
			break
		}
		if !strings.Contains(err.Error(), "failed calling webhook") || time.Now().After(deadline) {
			t.Fatalf("allocation with failurePolicy Ignore and no webhook: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// 10. Owned annotations cannot be forged by an untrusted identity.
func TestScenario10_OwnedAnnotationsCannotBeForged(t *testing.T) {
	e := gate(t, harness.RegisterOptions{})
	ctx := harness.Ctx(t)

	// On a Ready server: alice adds an owned annotation. Outside the allocation cycle the mutating
	// webhook strips them (rule 5) or the validating webhook refuses: either way none is stored.
	e.ready(t, "ready", true)
	for _, k := range []string{harness.ConfirmedKey, harness.OutcomeKey, harness.SinceKey, harness.AllocationKey} {
		got, err := harness.SDKPatch(ctx, e.cp.Dynamic(t, harness.User), e.ns, "ready",
			map[string]interface{}{"op": "add", "path": "/metadata/annotations", "value": map[string]string{k: "forged"}})
		if err != nil {
			wantErrContains(t, err, "alice adding "+k, "denied the request", k)
		} else if harness.HasAnnotation(got, k) {
			t.Fatalf("alice forged %s on a Ready server: %s", k, harness.Describe(got))
		}
		noOwnedAnnotations(t, e.cp.GetGameServer(t, e.ns, "ready"))
	}

	// On an Allocating server: the game server (SDK) confirms itself and asks for Allocated.
	gs := e.allocating(t, "gs")
	allocation := harness.Annotation(gs, harness.AllocationKey)
	got, err := promote(ctx, e, e.sdk.Dyn, "gs", allocation)
	if err == nil && harness.State(got) == "Allocated" {
		t.Fatalf("the SDK promoted itself with a forged confirmed: %s", harness.Describe(got))
	}
	stored := e.cp.GetGameServer(t, e.ns, "gs")
	if harness.State(stored) != "Allocating" || harness.HasAnnotation(stored, harness.ConfirmedKey) {
		t.Fatalf("after a forged confirmation: %s", harness.Describe(stored))
	}
	// alice moves since back (to make the resolver time it out early): refused.
	_, err = harness.SDKPatch(ctx, e.cp.Dynamic(t, harness.User), e.ns, "gs",
		map[string]interface{}{"op": "replace", "path": "/metadata/annotations/" + harness.EscapeJSONPointer(harness.SinceKey), "value": "2000-01-01T00:00:00Z"})
	wantErrContains(t, err, "alice rewriting since", "denied the request", harness.SinceKey)
	// Dropping the allocation id with a full UPDATE: refused, or restored by the mutating webhook
	// to the same id; never stored missing or changed.
	cur := e.cp.GetGameServer(t, e.ns, "gs")
	ann := cur.GetAnnotations()
	delete(ann, harness.AllocationKey)
	cur.SetAnnotations(ann)
	_, err = e.cp.Dynamic(t, harness.User).Resource(harness.GameServerGVR).Namespace(e.ns).Update(ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		wantErrContains(t, err, "alice removing allocation", "denied the request", harness.AllocationKey)
	}
	if got := harness.Annotation(e.cp.GetGameServer(t, e.ns, "gs"), harness.AllocationKey); got != allocation {
		t.Fatalf("allocation annotation is %q after alice removed it, want %q", got, allocation)
	}
	// Replacing it with another id: same.
	_, err = harness.SDKPatch(ctx, e.cp.Dynamic(t, harness.User), e.ns, "gs",
		map[string]interface{}{"op": "replace", "path": "/metadata/annotations/" + harness.EscapeJSONPointer(harness.AllocationKey), "value": "forged-id"})
	if err != nil {
		wantErrContains(t, err, "alice replacing allocation", "denied the request", harness.AllocationKey)
	}
	if got := harness.Annotation(e.cp.GetGameServer(t, e.ns, "gs"), harness.AllocationKey); got != allocation {
		t.Fatalf("allocation annotation is %q after alice replaced it, want %q", got, allocation)
	}
}

// 11. The allocation gateway's delivery marks skip the webhooks (the GameServer webhooks'
// matchConditions in manifests/base): a write that changes only allocating.agones.dev/delivered
// and answer-by reaches neither webhook; the same write with anything else in it (a forged owned
// key, a label, the state) is reviewed as before.
func TestScenario11_DeliveryMarksSkipTheWebhook(t *testing.T) {
	e := gate(t, harness.RegisterOptions{})
	ctx := harness.Ctx(t)
	gs := e.allocating(t, "gs")
	allocation := harness.Annotation(gs, harness.AllocationKey)
	key := func(k string) string { return "/metadata/annotations/" + harness.EscapeJSONPointer(k) }

	before := requestsTotal(t, e.wh)
	got, err := harness.SDKPatch(ctx, e.cp.Dynamic(t, harness.User), e.ns, "gs",
		map[string]interface{}{"op": "add", "path": key(harness.AnswerByKey), "value": "2030-01-01T00:00:00Z"},
		map[string]interface{}{"op": "add", "path": key(harness.DeliveredKey), "value": "2030-01-01T00:00:00.000001Z"})
	if err != nil {
		t.Fatalf("writing the delivery marks: %v", err)
	}
	if harness.Annotation(got, harness.DeliveredKey) == "" || harness.State(got) != "Allocating" {
		t.Fatalf("after the delivery marks: %s", harness.Describe(got))
	}
	if after := requestsTotal(t, e.wh); after != before {
		t.Fatalf("a write of only the delivery marks reached the webhook (%v admission requests)", after-before)
	}

	// The marks with a forged owned key: reviewed, and the key never stored.
	for _, k := range []string{harness.ConfirmedKey, harness.OutcomeKey} {
		before = requestsTotal(t, e.wh)
		_, err = harness.SDKPatch(ctx, e.cp.Dynamic(t, harness.User), e.ns, "gs",
			map[string]interface{}{"op": "replace", "path": key(harness.DeliveredKey), "value": "2030-01-01T00:00:00.000002Z"},
			map[string]interface{}{"op": "add", "path": key(k), "value": allocation})
		if err != nil {
			wantErrContains(t, err, "a mark with "+k, "denied the request", k)
		}
		if requestsTotal(t, e.wh) == before {
			t.Fatalf("a delivery mark written with %s was not reviewed", k)
		}
		if stored := e.cp.GetGameServer(t, e.ns, "gs"); harness.HasAnnotation(stored, k) {
			t.Fatalf("%s stored next to a delivery mark: %s", k, harness.Describe(stored))
		}
	}
	// The marks with a state change: reviewed, so the untrusted promotion stays Allocating.
	before = requestsTotal(t, e.wh)
	got, err = harness.SDKPatch(ctx, e.cp.Dynamic(t, harness.User), e.ns, "gs",
		map[string]interface{}{"op": "replace", "path": key(harness.DeliveredKey), "value": "2030-01-01T00:00:00.000003Z"},
		map[string]interface{}{"op": "replace", "path": "/status/state", "value": "Allocated"})
	if err == nil && harness.State(got) == "Allocated" {
		t.Fatalf("a delivery mark carried an untrusted promotion: %s", harness.Describe(got))
	}
	if requestsTotal(t, e.wh) == before {
		t.Fatal("a delivery mark with a state change was not reviewed")
	}
	// A label added next to the marks: reviewed.
	before = requestsTotal(t, e.wh)
	_, _ = harness.SDKPatch(ctx, e.cp.Dynamic(t, harness.User), e.ns, "gs",
		map[string]interface{}{"op": "replace", "path": key(harness.DeliveredKey), "value": "2030-01-01T00:00:00.000004Z"},
		map[string]interface{}{"op": "add", "path": "/metadata/labels/extra", "value": "x"})
	if requestsTotal(t, e.wh) == before {
		t.Fatal("a delivery mark with a label change was not reviewed")
	}
}
