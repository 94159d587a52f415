// Package agones plays issue 9's defects against the webhook WITH its resolver, behind a real
// kube-apiserver, with every write made the way Agones v1.56 makes it (harness.AllocateLikeAgones,
// harness.ShutdownLikeGameServerSet, the SDK as the namespace's own service account): one scenario
// per defect, each of which failed before the fix.
package agones

import (
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agones-allocating-webhook/e2e/harness"
	"github.com/agones-allocating-webhook/e2e/standin"
)

func TestMain(m *testing.M) { harness.Main(m) }

type env struct {
	cp  *harness.ControlPlane
	ns  string
	wh  *harness.Webhook
	sdk *harness.SDK
}

// setup: the CRD accepts Allocating, one webhook+resolver registered and leading, a fresh namespace
// and its SDK identity.
func setup(t *testing.T, extra ...string) env {
	t.Helper()
	cp := harness.Setup(t)
	cp.AddAllocatingToEnum(t)
	wh := cp.StartResolver(t, "webhook", extra...)
	ns := cp.Namespace(t)
	return env{cp: cp, ns: ns, wh: wh, sdk: cp.SDK(t, ns)}
}

// ready creates an opted-in GameServer (as admin) and moves it to Ready as Agones' controller
// would, with address 127.0.0.1. mutate (optional) changes the GameServer before it is created.
func (e env) ready(t *testing.T, name string, mutate func(*unstructured.Unstructured), annotations ...string) {
	t.Helper()
	gs := harness.NewGameServer(name, true, annotations...)
	if mutate != nil {
		mutate(gs)
	}
	e.cp.CreateReadyGameServer(t, e.ns, gs)
}

func (e env) get(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	return e.cp.GetGameServer(t, e.ns, name)
}

// allocate is the REST/gRPC allocator (agones-allocator) applying an allocation; it must succeed.
func (e env) allocate(t *testing.T, name string, a harness.Allocation) (*unstructured.Unstructured, *harness.Warnings) {
	t.Helper()
	dyn, w := e.cp.DynamicWithWarnings(t, harness.AgonesAllocator)
	got, err := harness.AllocateLikeAgonesWith(harness.Ctx(t), dyn, e.ns, name, a)
	if err != nil {
		t.Fatalf("allocate %s: the allocator's update failed (Agones would poison its cache): %v", name, err)
	}
	return got, w
}

// confirm is the game server's SetAnnotation("allocating-ready", <allocation id>) through its own
// SDK identity.
func (e env) confirm(t *testing.T, name string) string {
	t.Helper()
	id, err := standin.ConfirmReady(harness.Ctx(t), e.sdk.Dyn, e.ns, name)
	if err != nil {
		t.Fatalf("SDK confirm %s: %v", name, err)
	}
	return id
}

// waitState polls until the state is reached and returns the object and when it was first seen.
func (e env) waitState(t *testing.T, name, state string, timeout time.Duration) (*unstructured.Unstructured, time.Time) {
	t.Helper()
	var gs *unstructured.Unstructured
	if !harness.Poll(timeout, 20*time.Millisecond, func() bool {
		gs = e.get(t, name)
		return harness.State(gs) == state
	}) {
		t.Fatalf("%s: want state %s within %v, have %s\nwebhook log tail:\n%s", name, state, timeout,
			harness.Describe(gs), e.wh.LogTail(30))
	}
	return gs, time.Now()
}

// stays checks that the server stays in state for d.
func (e env) stays(t *testing.T, name, state string, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if gs := e.get(t, name); harness.State(gs) != state {
			t.Fatalf("%s: left %s early: %s", name, state, harness.Describe(gs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// resolvedBy checks the invariant of issue 9: a server the webhook moved to Allocating leaves it by
// since + timeout + slack. It returns the object once it left Allocating.
func (e env) resolvedBy(t *testing.T, name string, timeout, slack time.Duration) *unstructured.Unstructured {
	t.Helper()
	gs := e.get(t, name)
	since := sinceOf(t, gs)
	deadline := since.Add(timeout + slack)
	for {
		gs = e.get(t, name)
		if harness.State(gs) != "Allocating" {
			return gs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still Allocating %v after since (timeout %v + %v): %s\nwebhook log tail:\n%s", name,
				time.Since(since).Round(time.Millisecond), timeout, slack, harness.Describe(gs), e.wh.LogTail(30))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func sinceOf(t *testing.T, gs *unstructured.Unstructured) time.Time {
	t.Helper()
	s, err := time.Parse(time.RFC3339Nano, harness.Annotation(gs, harness.SinceKey))
	if err != nil {
		t.Fatalf("since annotation: %v (%s)", err, harness.Describe(gs))
	}
	return s
}

func mustState(t *testing.T, what string, gs *unstructured.Unstructured, state string) {
	t.Helper()
	if harness.State(gs) != state {
		t.Fatalf("%s: want %s, got %s", what, state, harness.Describe(gs))
	}
}

func noKeys(t *testing.T, what string, gs *unstructured.Unstructured, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if harness.HasAnnotation(gs, k) {
			t.Errorf("%s: carries %s=%q: %s", what, k, harness.Annotation(gs, k), harness.Describe(gs))
		}
	}
}

func warned(t *testing.T, what string, w *harness.Warnings, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !w.Contains(s) {
			t.Errorf("%s: no AdmissionReview warning mentions %q; warnings: %q", what, s, w.All())
		}
	}
}

// sumMetric adds up every series of a metric (labelled or not) in a Prometheus exposition; with
// labelSub it counts only series whose label set contains it.
func sumMetric(exposition, name, labelSub string) float64 {
	var sum float64
	for _, l := range strings.Split(exposition, "\n") {
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		if labelSub != "" && !strings.Contains(l, labelSub) {
			continue
		}
		f := strings.Fields(l)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

func wantForbidden(t *testing.T, what string, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: allowed, want a 403 denial", what)
		return
	}
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: error %v, want 403 Forbidden", what, err)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: denial %q does not name %q", what, err.Error(), s)
		}
	}
}
