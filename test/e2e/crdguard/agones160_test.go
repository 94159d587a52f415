package crdguard

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agones-allocating-webhook/e2e/harness"
)

// selectableFields returns the jsonPaths of the GameServer CRD's first version's selectableFields.
func selectableFields(t *testing.T, cp *harness.ControlPlane) []string {
	t.Helper()
	crd, err := cp.Dynamic(t, harness.Admin).Resource(harness.CRDGVR).Get(context.Background(), "gameservers.agones.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) == 0 {
		t.Fatal("GameServer CRD has no versions")
	}
	v0, _ := versions[0].(map[string]interface{})
	fields, _, _ := unstructured.NestedSlice(v0, "selectableFields")
	var out []string
	for _, f := range fields {
		m, _ := f.(map[string]interface{})
		if p, ok := m["jsonPath"].(string); ok {
			out = append(out, p)
		}
	}
	return out
}

// The GameServer CRD as Agones 1.60 installs it (testdata/crds-agones-1.60: the 1.56 CRD plus
// selectableFields on .status.state and .status.nodeName) is guarded like 1.56's: the guard adds
// Allocating and keeps Agones' selectableFields, an Agones upgrade that re-applies it is repaired,
// allocations are rewritten, and a field selector on the state finds the held server.
func TestAgones160CRDWithSelectableFields(t *testing.T) {
	cp := harness.Setup(t)
	ns := cp.Namespace(t)
	fixture := filepath.Join("crds-agones-1.60", "gameserver.yaml")
	replaceWith(t, cp, fixture)
	t.Cleanup(func() { cp.ResetStockCRD(t) })
	if !waitFor(10*time.Second, func() bool { return len(selectableFields(t, cp)) == 2 && !cp.EnumHasAllocating(t) }) {
		t.Fatalf("the 1.60 CRD is not in place: selectableFields %v, enum %v", selectableFields(t, cp), cp.StateEnum(t))
	}

	w := startGuarded(t, cp)
	if !waitFor(30*time.Second, func() bool { return cp.EnumHasAllocating(t) && metric(w, gauge) == "1" }) {
		t.Fatalf("guard did not add Allocating to the 1.60 CRD (enum %v, gauge %q)", cp.StateEnum(t), metric(w, gauge))
	}
	if got := selectableFields(t, cp); len(got) != 2 || got[0] != ".status.state" || got[1] != ".status.nodeName" {
		t.Fatalf("the guard's patch changed Agones' selectableFields: %v", got)
	}
	cp.RegisterWebhooks(t, w, harness.RegisterOptions{})

	repaired := time.Now()
	var held string
	if !waitFor(30*time.Second, func() bool {
		name := "sf-" + randSuffix()
		state, err := tryAllocate(t, cp, ns, name)
		if err != nil && !propagationRace(err, time.Since(repaired)) {
			t.Fatalf("allocation on the 1.60 CRD: %v", err)
		}
		if state == "Allocating" {
			held = name
		}
		return state == "Allocating"
	}) {
		t.Fatal("allocations never became Allocating on the 1.60 CRD")
	}

	// kubectl get gs --field-selector status.state=Allocating: served by the CRD's selectableFields.
	list := func(selector string) []string {
		l, err := cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(ns).List(context.Background(),
			metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			t.Fatalf("list with --field-selector %s: %v", selector, err)
		}
		var names []string
		for _, item := range l.Items {
			names = append(names, item.GetName())
		}
		return names
	}
	contains := func(names []string, name string) bool {
		for _, n := range names {
			if n == name {
				return true
			}
		}
		return false
	}
	if got := list("status.state=Allocating"); !contains(got, held) {
		t.Fatalf("field selector status.state=Allocating: %v, want %s among them", got, held)
	}
	if got := list("status.state=Allocated"); contains(got, held) {
		t.Fatalf("field selector status.state=Allocated lists the held server %s: %v", held, got)
	}

	// An upgrade of Agones 1.60 re-applies its CRD: repaired, selectableFields kept.
	reset := time.Now()
	replaceWith(t, cp, fixture)
	if !waitFor(10*time.Second, func() bool { return cp.EnumHasAllocating(t) }) {
		t.Fatalf("the re-applied 1.60 CRD was not repaired within 10s (enum %v)", cp.StateEnum(t))
	}
	t.Logf("re-applied 1.60 CRD repaired within %v", time.Since(reset).Round(10*time.Millisecond))
	if got := selectableFields(t, cp); len(got) != 2 {
		t.Fatalf("selectableFields after the repair: %v", got)
	}
}
