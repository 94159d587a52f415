package agones

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agones-allocating-webhook/e2e/harness"
)

// slack is how long past its deadline a server may stay Allocating (issue 9: deadline + one
// period; the tests allow 1s).
const slack = time.Second

// Defect 1: an allocation whose metadata labels set allocating.agones.dev/enabled=false. The server
// is still gated (the old object was opted in), the webhook keeps the label "true" with a warning,
// and the resolver resolves it: Allocated once the SDK confirms, TimedOut at its deadline otherwise.
func TestDefect1_OptOutLabelInAllocationMetadata(t *testing.T) {
	e := setup(t)
	optOut := harness.Allocation{Labels: map[string]string{harness.EnabledLabel: "false", "match": "m1"}}

	t.Run("confirmed", func(t *testing.T) {
		e.ready(t, "optout-confirm", nil, harness.TimeoutKey, "4s")
		got, w := e.allocate(t, "optout-confirm", optOut)
		for what, gs := range map[string]*unstructured.Unstructured{"allocator's answer": got, "stored": e.get(t, "optout-confirm")} {
			mustState(t, what, gs, "Allocating")
			if l := gs.GetLabels()[harness.EnabledLabel]; l != "true" {
				t.Errorf("%s: label %s=%q, want it restored to \"true\"", what, harness.EnabledLabel, l)
			}
			if gs.GetLabels()["match"] != "m1" {
				t.Errorf("%s: the allocation's other labels were lost: %s", what, harness.Describe(gs))
			}
		}
		warned(t, "opt-out label in an allocation", w, harness.EnabledLabel)
		e.confirm(t, "optout-confirm")
		gs := e.resolvedBy(t, "optout-confirm", 4*time.Second, slack)
		mustState(t, "after the SDK confirmed", gs, "Allocated")
		if harness.Annotation(gs, harness.OutcomeKey) != "Confirmed" {
			t.Errorf("want outcome Confirmed: %s", harness.Describe(gs))
		}
	})

	t.Run("timed-out", func(t *testing.T) {
		e.ready(t, "optout-timeout", nil, harness.TimeoutKey, "2s")
		got, _ := e.allocate(t, "optout-timeout", optOut)
		mustState(t, "allocator's answer", got, "Allocating")
		gs := e.resolvedBy(t, "optout-timeout", 2*time.Second, slack)
		if harness.Annotation(gs, harness.OutcomeKey) != "TimedOut" || harness.State(gs) != "Unhealthy" {
			t.Errorf("want outcome TimedOut and Unhealthy (the default on-timeout): %s", harness.Describe(gs))
		}
	})

	// A later write that opts the server out while it is Allocating (admin with kubectl label, and
	// alice) is not denied, the label stays/returns "true", and the server is still resolved by its
	// deadline.
	for _, who := range []string{harness.Admin, harness.User} {
		t.Run("later-label-by-"+who, func(t *testing.T) {
			name := "later-" + who
			e.ready(t, name, nil, harness.TimeoutKey, "2s")
			got, _ := e.allocate(t, name, harness.Allocation{})
			mustState(t, "allocator's answer", got, "Allocating")
			if _, se, err := e.cp.Kubectl(who, "", "-n", e.ns, "label", "gameserver/"+name,
				harness.EnabledLabel+"=false", "--overwrite"); err != nil {
				t.Fatalf("kubectl label %s=false as %s was refused: %v %s", harness.EnabledLabel, who, err, se)
			}
			gs := e.get(t, name)
			if harness.State(gs) == "Allocating" && gs.GetLabels()[harness.EnabledLabel] != "true" {
				t.Errorf("an Allocating server lost its opt-in label: %s", harness.Describe(gs))
			}
			gs = e.resolvedBy(t, name, 2*time.Second, slack)
			if harness.Annotation(gs, harness.OutcomeKey) != "TimedOut" {
				t.Errorf("want outcome TimedOut: %s", harness.Describe(gs))
			}
		})
	}
}
