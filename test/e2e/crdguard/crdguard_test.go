package crdguard

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/agones-allocating-webhook/e2e/harness"
)

const gauge = "allocating_webhook_crd_accepts_allocating"

func metric(w *harness.Webhook, name string) string {
	code, body, err := w.Get("/metrics")
	if err != nil || code != 200 {
		return ""
	}
	return harness.MetricValue(body, name)
}

// waitFor polls cond every 50ms until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	return harness.Poll(timeout, 50*time.Millisecond, cond)
}

func startGuarded(t *testing.T, cp *harness.ControlPlane, extra ...string) *harness.Webhook {
	args := append([]string{"--kubeconfig=" + cp.Kubeconfig, "--context=" + harness.Resolver}, extra...)
	return cp.StartWebhook(t, harness.WebhookOptions{Name: "guarded", Args: args})
}

// replaceWithStock puts the stock CRD spec back without waiting (the guard may repair it at once).
func replaceWithStock(t *testing.T, cp *harness.ControlPlane) {
	t.Helper()
	replaceWith(t, cp, filepath.Join("crds", "gameserver.yaml"))
}

// replaceWith puts the spec of the CRD fixture FILE (under testdata) in place without waiting.
func replaceWith(t *testing.T, cp *harness.ControlPlane, file string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(harness.TestdataDir(), file))
	if err != nil {
		t.Fatal(err)
	}
	var stock map[string]interface{}
	if err := yaml.Unmarshal(b, &stock); err != nil {
		t.Fatal(err)
	}
	dyn := cp.Dynamic(t, harness.Admin).Resource(harness.CRDGVR)
	for i := 0; ; i++ {
		cur, err := dyn.Get(context.Background(), "gameservers.agones.dev", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Object["spec"] = stock["spec"]
		if _, err = dyn.Update(context.Background(), cur, metav1.UpdateOptions{}); err == nil {
			return
		} else if i > 5 {
			t.Fatalf("replace CRD: %v", err)
		}
	}
}

// allocate creates a Ready opted-in GameServer and allocates it like Agones; returns the state the
// API server answered with.
func allocate(t *testing.T, cp *harness.ControlPlane, ns, name string) string {
	t.Helper()
	state, err := tryAllocate(t, cp, ns, name)
	if err != nil {
		t.Fatalf("allocate %s: %v", name, err)
	}
	return state
}

func tryAllocate(t *testing.T, cp *harness.ControlPlane, ns, name string) (string, error) {
	t.Helper()
	gs := cp.CreateReadyGameServer(t, ns, harness.NewGameServer(name, true))
	got, err := harness.AllocateLikeAgones(harness.Ctx(t), cp.Dynamic(t, harness.AgonesController), ns, gs.GetName(), nil, nil)
	if err != nil {
		return "", err
	}
	return harness.State(got), nil
}

// propagationRace reports whether err is kube-apiserver refusing a rewrite to Allocating because
// its CRD schema and the guard's view of it differed at that instant. Both learn of a CRD change
// through their own watch, so for a moment after a CRD write (a reset, or the guard's repair) the
// webhook's answer can be stale: the README documents this window. Anything else is a failure.
func propagationRace(err error, sinceChange time.Duration) bool {
	return err != nil && strings.Contains(err.Error(), `Unsupported value: "Allocating"`) &&
		sinceChange < 2*time.Second
}

func TestGuardAddsAllocatingAndRepairsResets(t *testing.T) {
	cp := harness.Setup(t)
	ns := cp.Namespace(t)
	cp.ResetStockCRD(t)
	start := time.Now()
	w := startGuarded(t, cp)
	if !waitFor(30*time.Second, func() bool { return cp.EnumHasAllocating(t) && metric(w, gauge) == "1" }) {
		t.Fatalf("guard did not add Allocating (enum %v, gauge %q)", cp.StateEnum(t), metric(w, gauge))
	}
	t.Logf("stock CRD repaired %v after the webhook started", time.Since(start).Round(10*time.Millisecond))
	cp.RegisterWebhooks(t, w, harness.RegisterOptions{})
	// Wait until the new schema is in effect, then the webhook rewrites allocations.
	repaired := time.Now()
	if !waitFor(30*time.Second, func() bool {
		state, err := tryAllocate(t, cp, ns, "gs-"+randSuffix())
		if err != nil && !propagationRace(err, time.Since(repaired)) {
			t.Fatalf("allocation after the repair: %v", err)
		}
		return state == "Allocating"
	}) {
		t.Fatal("allocations never became Allocating after the guard added the state")
	}

	// An Agones upgrade re-applies the stock CRD: repaired within seconds; allocations meanwhile
	// either rewrite (CRD already repaired) or succeed as Allocated (fail open), never fail.
	for round := 0; round < 3; round++ {
		reset := time.Now()
		replaceWithStock(t, cp)
		raced := 0
		for i := 0; i < 3; i++ {
			s, err := tryAllocate(t, cp, ns, "gap-"+randSuffix())
			if propagationRace(err, time.Since(reset)) {
				raced++
				t.Logf("round %d: allocation %v after the reset met the propagation window: %v",
					round, time.Since(reset).Round(time.Millisecond), err)
				continue
			}
			if err != nil {
				t.Fatalf("allocation during the gap: %v", err)
			}
			if s != "Allocated" && s != "Allocating" {
				t.Fatalf("allocation during the gap: state %q", s)
			}
		}
		if raced == 3 {
			t.Fatalf("round %d: every allocation during the gap was refused", round)
		}
		if !waitFor(10*time.Second, func() bool { return cp.EnumHasAllocating(t) }) {
			t.Fatalf("round %d: reset CRD not repaired within 10s (enum %v)", round, cp.StateEnum(t))
		}
		t.Logf("round %d: stock CRD repaired within %v", round, time.Since(reset).Round(10*time.Millisecond))
	}
	if !waitFor(5*time.Second, func() bool { return metric(w, gauge) == "1" }) {
		t.Fatalf("gauge %q after repairs", metric(w, gauge))
	}
	enum := cp.StateEnum(t)
	n := 0
	for _, s := range enum {
		if s == "Allocating" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("enum lists Allocating %d times: %v", n, enum)
	}
}

var suffix int

func randSuffix() string {
	suffix++
	return strings.ToLower(strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")) + "-" + string(rune('a'+suffix%26))
}

func TestManageCrdFalseFailsOpen(t *testing.T) {
	cp := harness.Setup(t)
	ns := cp.Namespace(t)
	cp.ResetStockCRD(t)
	w := startGuarded(t, cp, "--manage-crd=false")
	cp.RegisterWebhooks(t, w, harness.RegisterOptions{})
	time.Sleep(3 * time.Second)
	if cp.EnumHasAllocating(t) {
		t.Fatal("--manage-crd=false patched the CRD")
	}
	if g := metric(w, gauge); g != "0" {
		t.Fatalf("gauge %q, want 0", g)
	}
	if s := allocate(t, cp, ns, "open-1"); s != "Allocated" {
		t.Fatalf("allocation with a stock CRD: state %q, want Allocated (fail open)", s)
	}
	// Someone else (an admin) adds the state: the guard notices through its watch and the webhook
	// starts rewriting without a restart.
	cp.AddAllocatingToEnum(t)
	if !waitFor(10*time.Second, func() bool { return metric(w, gauge) == "1" }) {
		t.Fatalf("gauge did not follow the CRD: %q", metric(w, gauge))
	}
	if s := allocate(t, cp, ns, "gated-1"); s != "Allocating" {
		t.Fatalf("allocation after the admin added the state: %q, want Allocating", s)
	}
}

// withoutCrdPatch removes "patch" from the allocating-webhook ClusterRole's CRD rule for the test.
func withoutCrdPatch(t *testing.T, cp *harness.ControlPlane) {
	t.Helper()
	out := cp.MustKubectl(t, harness.Admin, "", "get", "clusterrole", "allocating-webhook", "-o", "json")
	var role map[string]interface{}
	if err := json.Unmarshal([]byte(out), &role); err != nil {
		t.Fatal(err)
	}
	original := out
	rules, _ := role["rules"].([]interface{})
	changed := false
	for _, r := range rules {
		rule := r.(map[string]interface{})
		res, _ := rule["resources"].([]interface{})
		if len(res) == 1 && res[0] == "customresourcedefinitions" {
			var verbs []interface{}
			for _, v := range rule["verbs"].([]interface{}) {
				if v != "patch" && v != "update" {
					verbs = append(verbs, v)
				}
			}
			rule["verbs"] = verbs
			changed = true
		}
	}
	if !changed {
		t.Fatal("no customresourcedefinitions rule in the allocating-webhook ClusterRole")
	}
	b, _ := json.Marshal(role)
	cp.MustKubectl(t, harness.Admin, string(b), "replace", "-f", "-")
	t.Cleanup(func() {
		var r map[string]interface{}
		_ = json.Unmarshal([]byte(original), &r)
		if md, ok := r["metadata"].(map[string]interface{}); ok {
			delete(md, "resourceVersion")
		}
		b, _ := json.Marshal(r)
		cp.MustKubectl(t, harness.Admin, string(b), "apply", "-f", "-")
	})
	// Wait until the authorizer sees it.
	if !waitFor(10*time.Second, func() bool {
		o, _, _ := cp.Kubectl(harness.Resolver, "", "auth", "can-i", "patch", "customresourcedefinitions/gameservers.agones.dev")
		return strings.TrimSpace(o) == "no"
	}) {
		t.Fatal("RBAC change not in effect")
	}
}

func TestRBACDeniedPatchFailsOpen(t *testing.T) {
	cp := harness.Setup(t)
	ns := cp.Namespace(t)
	cp.ResetStockCRD(t)
	withoutCrdPatch(t, cp)
	w := startGuarded(t, cp)
	cp.RegisterWebhooks(t, w, harness.RegisterOptions{})
	if !waitFor(30*time.Second, func() bool { return strings.Contains(w.Logs(), "not allowed to patch the GameServer CRD (RBAC)") }) {
		t.Fatalf("no clear RBAC log line")
	}
	time.Sleep(3 * time.Second)
	if n := strings.Count(w.Logs(), "not allowed to patch the GameServer CRD (RBAC)"); n != 1 {
		t.Errorf("RBAC message logged %d times, want once", n)
	}
	if g := metric(w, gauge); g != "0" {
		t.Errorf("gauge %q, want 0", g)
	}
	if cp.EnumHasAllocating(t) {
		t.Fatal("CRD patched despite RBAC")
	}
	if s := allocate(t, cp, ns, "rbac-1"); s != "Allocated" {
		t.Fatalf("allocation while the CRD cannot be fixed: %q, want Allocated (fail open)", s)
	}
	if code, _, _ := w.Get("/readyz"); code != 200 {
		t.Errorf("/readyz %d while failing open, want 200", code)
	}
}
