package agones

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agones-allocating-webhook/e2e/harness"
)

// shutdownByController is the GameServerSet controller's scale-down write; it must not fail (a
// failure aborts Agones' pass and freezes Fleet status).
func (e env) shutdownByController(t *testing.T, name string) (*unstructured.Unstructured, *harness.Warnings) {
	t.Helper()
	dyn, w := e.cp.DynamicWithWarnings(t, harness.AgonesController)
	got, err := harness.ShutdownLikeGameServerSet(harness.Ctx(t), dyn, e.ns, name, "")
	if err != nil {
		t.Fatalf("GameServerSet scale-down of %s failed (Agones would abort its pass): %v", name, err)
	}
	return got, w
}

func warnedScaleDown(t *testing.T, w *harness.Warnings) {
	t.Helper()
	for _, m := range w.All() {
		if l := strings.ToLower(m); strings.Contains(l, "scale-down") || strings.Contains(l, "scale down") {
			return
		}
	}
	t.Errorf("no warning mentions scale-down protection; warnings: %q", w.All())
}

// Defect 3: the GameServerSet controller's scale-down/rolling-update write (a full UPDATE to
// Shutdown as agones-controller) of an Allocating server succeeds. By default (issue 24) it is
// applied, with outcome ScaledDown; with on-scale-down: Hold the server stays Allocating until it is
// resolved. The controller then counts it as deleted for good (AGONES-NOTES.md), so the
// held Shutdown is applied when the server leaves the cycle, and a timeout ends in Shutdown. The game
// server (SDK) and the resolver shut it down at once; a server being deleted is not held.
func TestDefect3_ScaleDownOfAnAllocatingServer(t *testing.T) {
	e := setup(t)

	// The default: the Shutdown is applied (nobody has been sent to the server yet), the abandoned
	// allocation is named by outcome ScaledDown, since and allocation; the confirmed/forged keys go.
	t.Run("default-applies-the-shutdown", func(t *testing.T) {
		e.ready(t, "sd-default", nil, harness.TimeoutKey, "20s")
		e.allocate(t, "sd-default", harness.Allocation{})
		allocation := harness.Annotation(e.get(t, "sd-default"), harness.AllocationKey)
		got, _ := e.shutdownByController(t, "sd-default")
		mustState(t, "controller's answer", got, "Shutdown")
		if o := harness.Annotation(got, harness.OutcomeKey); o != "ScaledDown" {
			t.Errorf("outcome %q, want ScaledDown: %s", o, harness.Describe(got))
		}
		if a := harness.Annotation(got, harness.AllocationKey); a != allocation || a == "" {
			t.Errorf("allocation %q, want the abandoned allocation %q kept", a, allocation)
		}
		noKeys(t, "scaled down", got, harness.ShutdownRequestedKey, harness.ConfirmedKey)
		// Anyone else's Shutdown is not the controller's scale-down: the server leaves the cycle
		// cleaned, a forged outcome included.
		e.ready(t, "sd-forged", nil, harness.TimeoutKey, "20s")
		e.allocate(t, "sd-forged", harness.Allocation{})
		gs := e.get(t, "sd-forged")
		_ = unstructured.SetNestedField(gs.Object, "Shutdown", "status", "state")
		a := gs.GetAnnotations()
		a[harness.OutcomeKey] = "ScaledDown"
		gs.SetAnnotations(a)
		forged, err := e.cp.Dynamic(t, harness.User).Resource(harness.GameServerGVR).Namespace(e.ns).
			Update(harness.Ctx(t), gs, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("a user's Shutdown of an Allocating server: %v", err)
		}
		mustState(t, "a user's Shutdown", forged, "Shutdown")
		noKeys(t, "a user's Shutdown with a forged outcome", forged, harness.OutcomeKey, harness.AllocationKey)
	})

	t.Run("held-then-confirmed", func(t *testing.T) {
		e.ready(t, "sd-confirm", nil, harness.TimeoutKey, "4s", harness.OnScaleDownKey, "Hold")
		e.allocate(t, "sd-confirm", harness.Allocation{})
		got, w := e.shutdownByController(t, "sd-confirm")
		mustState(t, "controller's answer", got, "Allocating")
		mustState(t, "stored", e.get(t, "sd-confirm"), "Allocating")
		warnedScaleDown(t, w)
		e.stays(t, "sd-confirm", "Allocating", 500*time.Millisecond)
		e.confirm(t, "sd-confirm")
		gs := e.resolvedBy(t, "sd-confirm", 4*time.Second, slack)
		mustState(t, "after the SDK confirmed", gs, "Allocated")
		// Agones never shuts an Allocated server down, and its GameServerSet controller now counts
		// this one as deleted (AGONES-NOTES.md): the held Shutdown is applied when the server leaves
		// the cycle, e.g. the game server's Ready() (RequestReady) after its match.
		if !harness.HasAnnotation(gs, harness.ShutdownRequestedKey) {
			t.Errorf("the held Shutdown is not recorded (%s): %s", harness.ShutdownRequestedKey, harness.Describe(gs))
		}
		got, err := e.sdk.SetState(harness.Ctx(t), "sd-confirm", "RequestReady")
		if err != nil {
			t.Fatalf("SDK Ready() after the match: %v", err)
		}
		mustState(t, "SDK Ready() of a server whose scale-down was held", got, "Shutdown")
	})

	t.Run("held-then-timed-out", func(t *testing.T) {
		e.ready(t, "sd-timeout", nil, harness.TimeoutKey, "2s", harness.OnScaleDownKey, "Hold")
		e.allocate(t, "sd-timeout", harness.Allocation{})
		got, w := e.shutdownByController(t, "sd-timeout")
		mustState(t, "controller's answer", got, "Allocating")
		warnedScaleDown(t, w)
		since := sinceOf(t, e.get(t, "sd-timeout"))
		e.stays(t, "sd-timeout", "Allocating", time.Until(since.Add(1500*time.Millisecond)))
		gs := e.resolvedBy(t, "sd-timeout", 2*time.Second, slack)
		// An Unhealthy server would never be replaced by the controller that counts it as deleted,
		// so a held server times out to Shutdown (on-timeout Unhealthy, the default).
		mustState(t, "at the deadline", gs, "Shutdown")
		if harness.Annotation(gs, harness.OutcomeKey) != "TimedOut" {
			t.Errorf("want outcome TimedOut: %s", harness.Describe(gs))
		}
	})

	// A held server that the controller asks again (e.g. a later pass after a controller restart)
	// still just stays Allocating: the request is recorded once.
	t.Run("held-twice", func(t *testing.T) {
		e.ready(t, "sd-twice", nil, harness.TimeoutKey, "20s", harness.OnScaleDownKey, "hold")
		e.allocate(t, "sd-twice", harness.Allocation{})
		e.shutdownByController(t, "sd-twice")
		first := harness.Annotation(e.get(t, "sd-twice"), harness.ShutdownRequestedKey)
		got, _ := e.shutdownByController(t, "sd-twice")
		mustState(t, "second Shutdown", got, "Allocating")
		if second := harness.Annotation(got, harness.ShutdownRequestedKey); second != first || first == "" {
			t.Errorf("%s changed from %q to %q", harness.ShutdownRequestedKey, first, second)
		}
	})

	t.Run("sdk-and-resolver-shut-down-at-once", func(t *testing.T) {
		for _, who := range []string{"sdk", "resolver"} {
			name := "sd-" + who
			e.ready(t, name, nil, harness.TimeoutKey, "20s")
			e.allocate(t, name, harness.Allocation{})
			var got *unstructured.Unstructured
			var err error
			if who == "sdk" {
				got, err = e.sdk.SetState(harness.Ctx(t), name, "Shutdown") // SDK Shutdown()
			} else {
				got, err = harness.SDKSetState(harness.Ctx(t), e.cp.Dynamic(t, harness.Resolver), e.ns, name, "Shutdown")
			}
			if err != nil {
				t.Fatalf("%s Shutdown of an Allocating server: %v", who, err)
			}
			mustState(t, who+" Shutdown", got, "Shutdown")
		}
	})

	t.Run("being-deleted-is-not-held", func(t *testing.T) {
		const finalizer = "e2e.allocating.agones.dev/hold"
		e.ready(t, "sd-deleted", func(gs *unstructured.Unstructured) { gs.SetFinalizers([]string{finalizer}) },
			harness.TimeoutKey, "20s")
		t.Cleanup(func() {
			_, _ = e.cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(e.ns).Patch(harness.Ctx(t),
				"sd-deleted", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		})
		e.allocate(t, "sd-deleted", harness.Allocation{})
		if err := e.cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(e.ns).
			Delete(harness.Ctx(t), "sd-deleted", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete: %v", err)
		}
		if gs := e.get(t, "sd-deleted"); gs.GetDeletionTimestamp() == nil {
			t.Fatalf("no deletionTimestamp: %s", harness.Describe(gs))
		}
		got, _ := e.shutdownByController(t, "sd-deleted")
		mustState(t, "controller's Shutdown of a server being deleted", got, "Shutdown")
	})
}
