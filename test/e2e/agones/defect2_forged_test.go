package agones

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agones-allocating-webhook/e2e/harness"
)

const neutralisedMetric = "allocating_webhook_neutralised_keys_total"

// forge sets the project-owned keys in an allocation's metadata annotations with values chosen to
// promote the server: confirmed = the allocation id the webhook will use (the allocator's own
// agones.dev/last-allocated, known only once the allocator applied the allocation, hence Mutate),
// outcome Confirmed, since in the past or the future.
func forge(since string) harness.Allocation {
	return harness.Allocation{
		Annotations: map[string]string{"map": "dust2"},
		Mutate: func(gs *unstructured.Unstructured) error {
			a := gs.GetAnnotations()
			id := a[harness.LastAllocatedKey]
			a[harness.ConfirmedKey] = id
			a[harness.AllocationKey] = id
			a[harness.OutcomeKey] = "Confirmed"
			a[harness.SinceKey] = since
			gs.SetAnnotations(a)
			return nil
		},
	}
}

// Defect 2: an allocation whose metadata carries owned keys. The allocator's update is never denied
// (a denial poisons Agones' allocation cache); the keys are neutralised with a warning and a metric;
// nothing forged promotes the server; the next allocation works.
func TestDefect2_ForgedOwnedKeysInAllocationMetadata(t *testing.T) {
	e := setup(t)
	for _, c := range []struct{ name, since string }{
		{"forged-past", "2000-01-01T00:00:00Z"},
		{"forged-future", time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339Nano)},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.ready(t, c.name, nil, harness.TimeoutKey, "2s")
			before := sumMetric(e.wh.Metrics(t), neutralisedMetric, "")
			start := time.Now()
			got, w := e.allocate(t, c.name, forge(c.since))
			for what, gs := range map[string]*unstructured.Unstructured{"allocator's answer": got, "stored": e.get(t, c.name)} {
				mustState(t, what, gs, "Allocating")
				since := sinceOf(t, gs)
				if since.Before(start.Add(-3*time.Second)) || since.After(time.Now().Add(3*time.Second)) {
					t.Errorf("%s: since %v is not fresh (allocated at %v)", what, since, start)
				}
				if a, last := harness.Annotation(gs, harness.AllocationKey), harness.Annotation(gs, harness.LastAllocatedKey); a != last || a == "" {
					t.Errorf("%s: allocation %q, want the allocator's last-allocated %q", what, a, last)
				}
				noKeys(t, what, gs, harness.ConfirmedKey, harness.OutcomeKey)
				if harness.Annotation(gs, "map") != "dust2" {
					t.Errorf("%s: the allocation's own annotations were lost: %s", what, harness.Describe(gs))
				}
			}
			warned(t, "forged owned keys", w, harness.ConfirmedKey, harness.OutcomeKey)
			m := e.wh.Metrics(t)
			if after := sumMetric(m, neutralisedMetric, ""); after <= before {
				t.Errorf("%s did not increase (%v -> %v)", neutralisedMetric, before, after)
			}
			if sumMetric(m, neutralisedMetric, `key="`+harness.ConfirmedKey+`"`) == 0 {
				t.Errorf("%s has no series with key=%q:\n%s", neutralisedMetric, harness.ConfirmedKey, grep(m, neutralisedMetric))
			}
			// Never promoted without the SDK: TimedOut at the deadline.
			gs := e.resolvedBy(t, c.name, 2*time.Second, slack)
			if harness.State(gs) == "Allocated" || harness.Annotation(gs, harness.OutcomeKey) != "TimedOut" {
				t.Errorf("forged keys must not promote: %s", harness.Describe(gs))
			}
			// The next allocation of another Ready server works (the cache was not poisoned).
			e.ready(t, c.name+"-next", nil, harness.TimeoutKey, "20s")
			next, _ := e.allocate(t, c.name+"-next", harness.Allocation{})
			mustState(t, "the next allocation", next, "Allocating")
		})
	}

	// Re-allocation of an Allocated server (a selector with gameServerState: Allocated) with forged
	// keys: not denied, owned keys unchanged.
	t.Run("re-allocation", func(t *testing.T) {
		e.ready(t, "realloc", nil, harness.TimeoutKey, "20s")
		e.allocate(t, "realloc", harness.Allocation{})
		e.confirm(t, "realloc")
		before, _ := e.waitState(t, "realloc", "Allocated", 5*time.Second)
		got, w := e.allocate(t, "realloc", harness.Allocation{Annotations: map[string]string{
			harness.ConfirmedKey: "forged", harness.OutcomeKey: "TimedOut",
			harness.SinceKey: "2000-01-01T00:00:00Z", harness.AllocationKey: "forged"}})
		stored := e.get(t, "realloc")
		for what, gs := range map[string]*unstructured.Unstructured{"allocator's answer": got, "stored": stored} {
			for _, k := range []string{harness.ConfirmedKey, harness.OutcomeKey, harness.SinceKey, harness.AllocationKey} {
				if harness.Annotation(gs, k) != harness.Annotation(before, k) {
					t.Errorf("%s: %s changed from %q to %q", what, k, harness.Annotation(before, k), harness.Annotation(gs, k))
				}
			}
		}
		t.Logf("re-allocation: state %s, warnings %q", harness.State(stored), w.All())
	})

	// mode: reject is the user's documented choice: a new allocation is denied.
	t.Run("reject-mode", func(t *testing.T) {
		e.ready(t, "rejecting", nil, harness.ModeKey, "reject", harness.TimeoutKey, "20s")
		_, err := harness.AllocateLikeAgonesWith(harness.Ctx(t), e.cp.Dynamic(t, harness.AgonesAllocator), e.ns, "rejecting",
			forge("2000-01-01T00:00:00Z"))
		if err == nil || !strings.Contains(err.Error(), "denied the request") {
			t.Fatalf("allocation in reject mode: err=%v, want a denial", err)
		}
		mustState(t, "after the denial", e.get(t, "rejecting"), "Ready")
	})
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
