// Package bypass checks issue 27 on a real kube-apiserver: with the webhook configurations'
// failurePolicy Ignore and admission unreachable (the configurations pointed at a closed port, the
// resolver running), an allocation of an opted-in GameServer reaches Allocated as the allocator
// wrote it. The resolver must record the bypass within one resync (Event, metric, annotation),
// confirm it after the fact once the game server's readiness write comes, or record the documented
// deadline outcome (left Allocated, outcome Unconfirmed); the gateway must answer only after the
// confirmation; and the resolver's writes must pass admission once it is reachable again.
package bypass

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agones-allocating-webhook/e2e/harness"
	"github.com/agones-allocating-webhook/e2e/standin"
)

func TestMain(m *testing.M) { harness.Main(m) }

const (
	bypassedKey = "allocating.agones.dev/bypassed"
	resync      = 5 * time.Second
)

type env struct {
	cp  *harness.ControlPlane
	ns  string
	wh  *harness.Webhook // admission + resolver (unreachable for admission unless registered)
	sdk *harness.SDK
}

// resolverArgs: harness.ResolverArgs with this package's resync period.
func resolverArgs(cp *harness.ControlPlane) []string {
	return cp.ResolverArgs("--resync-period=" + resync.String())
}

// pointAway registers the webhook configurations (failurePolicy Ignore, the manifests' default)
// at a port where nothing listens: admission is unreachable and kube-apiserver skips it.
func pointAway(t *testing.T, cp *harness.ControlPlane) {
	t.Helper()
	cp.RegisterWebhooksAt(t, harness.FreePort(t), filepath.Join(cp.WebhookCerts(t), "ca.crt"),
		harness.RegisterOptions{FailurePolicy: "Ignore", TimeoutSeconds: 2, NoWait: true})
}

// setup: the CRD accepts Allocating, a webhook with its resolver (leader), admission pointed away.
func setup(t *testing.T) env {
	t.Helper()
	cp := harness.Setup(t)
	cp.AddAllocatingToEnum(t)
	wh := cp.StartWebhook(t, harness.WebhookOptions{Name: "resolver", Args: resolverArgs(cp)})
	pointAway(t, cp)
	ns := cp.Namespace(t)
	e := env{cp: cp, ns: ns, wh: wh, sdk: cp.SDK(t, ns)}
	wh.WaitLeader(t, 20*time.Second)
	return e
}

func (e env) readyGameServer(t *testing.T, name string, annotations ...string) {
	t.Helper()
	ctx := harness.Ctx(t)
	c := e.cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(e.ns)
	gs := harness.NewGameServer(name, true, annotations...)
	gs.SetLabels(map[string]string{harness.EnabledLabel: "true", "agones.dev/fleet": "arena"})
	created, err := c.Create(ctx, gs, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	_ = unstructured.SetNestedField(created.Object, "Ready", "status", "state")
	_ = unstructured.SetNestedField(created.Object, "127.0.0.1", "status", "address")
	_ = unstructured.SetNestedSlice(created.Object, []interface{}{map[string]interface{}{"name": "default", "port": int64(7654)}}, "status", "ports")
	if _, err := c.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("move %s to Ready: %v", name, err)
	}
}

// allocateBypassed allocates like the Agones allocator and checks the gate was bypassed.
func (e env) allocateBypassed(t *testing.T, name string) (*unstructured.Unstructured, time.Time) {
	t.Helper()
	got, err := harness.AllocateLikeAgones(harness.Ctx(t), e.cp.Dynamic(t, harness.AgonesAllocator), e.ns, name, nil, nil)
	if err != nil {
		t.Fatalf("allocate %s: %v", name, err)
	}
	if harness.State(got) != "Allocated" || harness.HasAnnotation(got, harness.SinceKey) {
		t.Fatalf("admission was expected to be bypassed (Allocated, no since): %s", harness.Describe(got))
	}
	return got, time.Now()
}

func (e env) waitFor(t *testing.T, name, what string, timeout time.Duration, cond func(*unstructured.Unstructured) bool) (*unstructured.Unstructured, time.Time) {
	t.Helper()
	var gs *unstructured.Unstructured
	if !harness.Poll(timeout, 20*time.Millisecond, func() bool {
		gs = e.cp.GetGameServer(t, e.ns, name)
		return cond(gs)
	}) {
		t.Fatalf("%s: %s not within %v: %s\nwebhook log tail:\n%s", name, what, timeout, harness.Describe(gs), e.wh.LogTail(30))
	}
	return gs, time.Now()
}

func (e env) waitEvent(t *testing.T, name, reason string) string {
	t.Helper()
	var msg string
	if !harness.Poll(10*time.Second, 100*time.Millisecond, func() bool {
		list, err := e.cp.Clientset(t, harness.Admin).CoreV1().Events(e.ns).List(context.Background(),
			metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false
		}
		for _, ev := range list.Items {
			if ev.Reason == reason {
				msg = ev.Type + " " + ev.Message
				return true
			}
		}
		return false
	}) {
		t.Fatalf("%s: no Event %s", name, reason)
	}
	return msg
}

func metricLine(t *testing.T, wh *harness.Webhook, prefix string) string {
	for _, line := range strings.Split(wh.Metrics(t), "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}

// recorded waits until the resolver recorded the bypass and checks what it wrote.
func (e env) recorded(t *testing.T, name string, got *unstructured.Unstructured, at time.Time) *unstructured.Unstructured {
	t.Helper()
	id := harness.Annotation(got, harness.LastAllocatedKey)
	gs, seen := e.waitFor(t, name, "bypass recorded", resync+3*time.Second, func(u *unstructured.Unstructured) bool {
		return harness.Annotation(u, bypassedKey) != ""
	})
	t.Logf("bypass of %s recorded %v after the allocation (resync period %v)", name, seen.Sub(at).Round(time.Millisecond), resync)
	if seen.Sub(at) > resync+time.Second {
		t.Errorf("bypass recorded after %v, more than one resync (%v)", seen.Sub(at), resync)
	}
	for key, want := range map[string]string{bypassedKey: id, harness.AllocationKey: id, harness.SinceKey: id} {
		if v := harness.Annotation(gs, key); v != want {
			t.Errorf("%s = %q, want %q: %s", key, v, want, harness.Describe(gs))
		}
	}
	if harness.State(gs) != "Allocated" || harness.HasAnnotation(gs, harness.ConfirmedKey) {
		t.Errorf("recording must not change the state nor confirm: %s", harness.Describe(gs))
	}
	msg := e.waitEvent(t, name, "AllocatingBypassed")
	if !strings.HasPrefix(msg, "Warning ") {
		t.Errorf("AllocatingBypassed Event is not a Warning: %s", msg)
	}
	line := metricLine(t, e.wh, "allocating_webhook_bypassed_allocations_total{")
	if !strings.Contains(line, `namespace="`+e.ns+`"`) || !strings.Contains(line, `fleet="arena"`) {
		t.Errorf("bypass metric by namespace and fleet missing: %q", line)
	}
	if !strings.Contains(e.wh.Logs(), "allocation bypassed the gate") {
		t.Errorf("no log line for the bypass")
	}
	return gs
}

// The game server's readiness write (SDK) after the bypass was recorded: confirmed after the fact.
func TestBypassRecordedThenConfirmedAfterTheFact(t *testing.T) {
	e := setup(t)
	e.readyGameServer(t, "gs-a", harness.TimeoutKey, "30s")
	got, at := e.allocateBypassed(t, "gs-a")
	gs := e.recorded(t, "gs-a", got, at)
	id, err := standin.ConfirmReady(harness.Ctx(t), e.sdk.Dyn, e.ns, "gs-a")
	if err != nil {
		t.Fatalf("confirm: %v", err)
	}
	wrote := time.Now()
	gs, done := e.waitFor(t, "gs-a", "confirmed after the fact", 5*time.Second, func(u *unstructured.Unstructured) bool {
		return harness.Annotation(u, harness.ConfirmedKey) == id
	})
	t.Logf("confirmed %v after the readiness write", done.Sub(wrote).Round(time.Millisecond))
	if harness.State(gs) != "Allocated" || harness.Annotation(gs, harness.OutcomeKey) != "Confirmed" {
		t.Errorf("want Allocated, outcome Confirmed: %s", harness.Describe(gs))
	}
	e.waitEvent(t, "gs-a", "AllocatingBypassConfirmed")
	if line := metricLine(t, e.wh, `allocating_webhook_bypass_resolutions_total{outcome="Confirmed"}`); !strings.HasSuffix(line, " 1") {
		t.Errorf("resolution metric: %q", line)
	}
}

// No readiness: at the deadline the documented outcome (left Allocated, outcome Unconfirmed).
func TestBypassWithoutReadinessIsLeftAllocatedUnconfirmed(t *testing.T) {
	e := setup(t)
	e.readyGameServer(t, "gs-b", harness.TimeoutKey, "3s")
	got, at := e.allocateBypassed(t, "gs-b")
	e.recorded(t, "gs-b", got, at)
	gs, done := e.waitFor(t, "gs-b", "deadline outcome", 3*time.Second+resync, func(u *unstructured.Unstructured) bool {
		return harness.Annotation(u, harness.OutcomeKey) != ""
	})
	t.Logf("deadline outcome %v after the allocation", done.Sub(at).Round(time.Millisecond))
	if harness.State(gs) != "Allocated" || harness.Annotation(gs, harness.OutcomeKey) != "Unconfirmed" ||
		harness.HasAnnotation(gs, harness.ConfirmedKey) {
		t.Errorf("want Allocated, outcome Unconfirmed, no confirmed: %s", harness.Describe(gs))
	}
	msg := e.waitEvent(t, "gs-b", "AllocatingBypassUnconfirmed")
	if !strings.Contains(msg, "sdk-allocating-ready not set") {
		t.Errorf("the Event should name the failed check: %s", msg)
	}
	// Nothing more is written: the server stays as it is.
	time.Sleep(2 * time.Second)
	if after := e.cp.GetGameServer(t, e.ns, "gs-b"); after.GetResourceVersion() != gs.GetResourceVersion() {
		t.Errorf("written again after the outcome: %s", harness.Describe(after))
	}
}

// The outage ends before the resolver writes: its writes (record, confirm) and the SDK's readiness
// write pass the webhooks once they are reachable again, and a forged readiness annotation from
// an untrusted user is refused again.
func TestOutageEndsBeforeTheResolverWrites(t *testing.T) {
	cp := harness.Setup(t)
	cp.AddAllocatingToEnum(t)
	admission := cp.StartWebhook(t, harness.WebhookOptions{Name: "admission", Args: []string{"--crd-accepts-allocating=true"}})
	pointAway(t, cp)
	ns := cp.Namespace(t)
	e := env{cp: cp, ns: ns, wh: admission, sdk: cp.SDK(t, ns)}
	e.readyGameServer(t, "gs-c", harness.TimeoutKey, "60s")
	got, _ := e.allocateBypassed(t, "gs-c")
	cp.RegisterWebhooks(t, admission, harness.RegisterOptions{}) // admission reachable again
	// An untrusted user may not forge the readiness annotation or the owned keys any more: the
	// write is refused, or the mutating webhook reverts the keys (never stored either way).
	u := cp.Dynamic(t, harness.User).Resource(harness.GameServerGVR).Namespace(ns)
	for key, value := range map[string]string{harness.SdkReadyKey: harness.Annotation(got, harness.LastAllocatedKey), bypassedKey: "x"} {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
		res, err := u.Patch(harness.Ctx(t), "gs-c", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{})
		if err == nil && harness.HasAnnotation(res, key) {
			t.Errorf("an untrusted user's write of %s was stored: %s", key, harness.Describe(res))
		}
		t.Logf("untrusted write of %s: err=%v", key, err)
	}
	if gs := cp.GetGameServer(t, ns, "gs-c"); harness.HasAnnotation(gs, harness.SdkReadyKey) || harness.HasAnnotation(gs, bypassedKey) {
		t.Errorf("forged keys stored: %s", harness.Describe(gs))
	}
	// Now the resolver starts (admission is up): it records the bypass through the webhooks.
	e.wh = cp.StartWebhook(t, harness.WebhookOptions{Name: "resolver", Args: resolverArgs(cp)})
	e.wh.WaitLeader(t, 20*time.Second)
	e.recorded(t, "gs-c", got, time.Now())
	id, err := standin.ConfirmReady(harness.Ctx(t), e.sdk.Dyn, ns, "gs-c")
	if err != nil {
		t.Fatalf("the SDK's readiness write through admission: %v", err)
	}
	gs, _ := e.waitFor(t, "gs-c", "confirmed after the fact", 5*time.Second, func(u *unstructured.Unstructured) bool {
		return harness.Annotation(u, harness.ConfirmedKey) == id
	})
	if harness.State(gs) != "Allocated" || harness.Annotation(gs, harness.OutcomeKey) != "Confirmed" {
		t.Errorf("want Allocated, outcome Confirmed: %s", harness.Describe(gs))
	}
}

// Through the gateway, the matchmaker's answer comes only after the confirmation after the fact.
func TestGatewayAnswersOnlyAfterTheConfirmation(t *testing.T) {
	e := setup(t)
	alloc := e.cp.StartAllocatorStandin(t)
	clientCA := harness.NewTestCA(t, filepath.Join(e.cp.Dir, "bypass-gateway-clients"), "matchmaker-ca")
	gw := e.cp.StartGateway(t, alloc, clientCA.CAFile, "--deadline=30s")
	crt, key := clientCA.Issue(t, "director", "director", false)
	client := harness.HTTPSClient(t, gw.CAFile, crt, key)
	e.readyGameServer(t, "gs-d", harness.TimeoutKey, "30s")

	type answer struct {
		status int
		raw    string
		at     time.Time
	}
	ch := make(chan answer, 1)
	start := time.Now()
	go func() {
		res, err := client.Post(gw.URL("/gameserverallocation"), "application/json", bytes.NewBufferString(fmt.Sprintf(`{"namespace":%q}`, e.ns)))
		if err != nil {
			ch <- answer{status: -1, raw: err.Error(), at: time.Now()}
			return
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		ch <- answer{status: res.StatusCode, raw: string(raw), at: time.Now()}
	}()
	got, _ := e.waitFor(t, "gs-d", "allocated", 10*time.Second, func(u *unstructured.Unstructured) bool {
		return harness.State(u) == "Allocated"
	})
	if harness.HasAnnotation(got, harness.SinceKey) && !harness.HasAnnotation(got, bypassedKey) {
		t.Fatalf("admission was expected to be bypassed: %s", harness.Describe(got))
	}
	e.recorded(t, "gs-d", got, start)
	select {
	case a := <-ch:
		t.Fatalf("the gateway answered an unconfirmed bypassed server: HTTP %d %s", a.status, a.raw)
	case <-time.After(1500 * time.Millisecond):
	}
	id, err := standin.ConfirmReady(harness.Ctx(t), e.sdk.Dyn, e.ns, "gs-d")
	if err != nil {
		t.Fatalf("confirm: %v", err)
	}
	_, confirmedAt := e.waitFor(t, "gs-d", "confirmed", 5*time.Second, func(u *unstructured.Unstructured) bool {
		return harness.Annotation(u, harness.ConfirmedKey) == id
	})
	var a answer
	select {
	case a = <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no answer after the confirmation; gateway log:\n%s", gw.LogTail(30))
	}
	t.Logf("gateway answered HTTP %d %v after the request (the test saw the confirmation at %v; the answer carries it)",
		a.status, a.at.Sub(start).Round(time.Millisecond), confirmedAt.Sub(start).Round(time.Millisecond))
	if a.status != 200 {
		t.Fatalf("want 200, got %d %s", a.status, a.raw)
	}
	var body map[string]interface{}
	_ = json.Unmarshal([]byte(a.raw), &body)
	md, _ := body["metadata"].(map[string]interface{})
	ann, _ := md["annotations"].(map[string]interface{})
	if ann[harness.ConfirmedKey] != id || ann[harness.OutcomeKey] != "Confirmed" {
		t.Errorf("the answer does not carry the confirmation: %s", a.raw)
	}
	if name, _ := body["gameServerName"].(string); name != "gs-d" {
		t.Errorf("answered %q, want gs-d", name)
	}
}
