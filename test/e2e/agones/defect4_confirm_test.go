package agones

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/agones-allocating-webhook/e2e/harness"
)

// Defect 4: only the game server (its own SDK identity) and the trusted resolver may set or change
// agones.dev/sdk-allocating-ready on an opted-in server.
func TestDefect4_OnlyTheGameServerConfirms(t *testing.T) {
	e := setup(t)

	t.Run("others-denied-own-sdk-promotes", func(t *testing.T) {
		e.ready(t, "conf", nil, harness.TimeoutKey, "20s")
		got, _ := e.allocate(t, "conf", harness.Allocation{})
		id := harness.Annotation(got, harness.AllocationKey)
		for _, c := range []struct {
			who  string
			dyn  dynamic.Interface
			user string
		}{
			{"alice", e.cp.Dynamic(t, harness.User), harness.AliceUser},
			{"admin (system:masters, not trusted)", e.cp.Dynamic(t, harness.Admin), "admin"},
			{"agones-controller", e.cp.Dynamic(t, harness.AgonesController), harness.AgonesControllerUser},
			{"another namespace's agones-sdk", e.cp.Dynamic(t, harness.AgonesSDK), harness.AgonesSDKUser},
		} {
			_, err := harness.SDKSetAnnotation(harness.Ctx(t), c.dyn, e.ns, "conf", "allocating-ready", id)
			wantForbidden(t, c.who+" setting "+harness.SdkReadyKey, err, harness.SdkReadyKey, c.user)
		}
		// The same through kubectl (what a person runs).
		_, se, err := e.cp.Kubectl(harness.User, "", "-n", e.ns, "annotate", "gameserver/conf", harness.SdkReadyKey+"="+id)
		if err == nil || !strings.Contains(se, harness.SdkReadyKey) {
			t.Errorf("kubectl annotate as alice: err=%v stderr=%s", err, se)
		}
		gs := e.get(t, "conf")
		mustState(t, "after the denied writes", gs, "Allocating")
		noKeys(t, "after the denied writes", gs, harness.SdkReadyKey)
		// The game server itself: allowed, and the resolver promotes.
		e.confirm(t, "conf")
		gs, _ = e.waitState(t, "conf", "Allocated", 3*time.Second)
		if harness.Annotation(gs, harness.ConfirmedKey) != id {
			t.Errorf("confirmed %q, want %q", harness.Annotation(gs, harness.ConfirmedKey), id)
		}
		// Changing it afterwards is the SDK's alone too. On an Allocated server a write that keeps
		// state Allocated cannot be told from the allocator's re-allocation (which must never be
		// denied), so it may be neutralised instead of denied: either way the value stays.
		_, err = harness.SDKSetAnnotation(harness.Ctx(t), e.cp.Dynamic(t, harness.User), e.ns, "conf", "allocating-ready", "other")
		if err != nil {
			wantForbidden(t, "alice changing "+harness.SdkReadyKey, err, harness.SdkReadyKey, harness.AliceUser)
		}
		if v := harness.Annotation(e.get(t, "conf"), harness.SdkReadyKey); v != id {
			t.Errorf("alice changed %s on an Allocated server to %q (was %q)", harness.SdkReadyKey, v, id)
		}
	})

	t.Run("pod-template-service-account", func(t *testing.T) {
		e.ready(t, "own-sa", func(gs *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(gs.Object, "game-sa", "spec", "template", "spec", "serviceAccountName")
		}, harness.TimeoutKey, "20s")
		e.allocate(t, "own-sa", harness.Allocation{})
		own := e.cp.ServiceAccountSDK(t, e.ns, "game-sa")
		id, err := confirmAs(t, e, own.Dyn, "own-sa")
		if err != nil {
			t.Fatalf("SetAnnotation as the pod's own service account %s: %v", own.User, err)
		}
		gs, _ := e.waitState(t, "own-sa", "Allocated", 3*time.Second)
		if harness.Annotation(gs, harness.ConfirmedKey) != id {
			t.Errorf("confirmed %q, want %q", harness.Annotation(gs, harness.ConfirmedKey), id)
		}
	})

	t.Run("resolver-allowed", func(t *testing.T) {
		e.ready(t, "by-resolver", nil, harness.TimeoutKey, "20s")
		got, _ := e.allocate(t, "by-resolver", harness.Allocation{})
		if _, err := harness.SDKSetAnnotation(harness.Ctx(t), e.cp.Dynamic(t, harness.Resolver), e.ns, "by-resolver",
			"allocating-ready", harness.Annotation(got, harness.AllocationKey)); err != nil {
			t.Fatalf("the trusted resolver identity setting %s: %v", harness.SdkReadyKey, err)
		}
	})

	// The allocator carrying it in the allocation's metadata annotations (with the very id the
	// webhook will use): not denied, neutralised, never promotes.
	t.Run("allocator-metadata-neutralised", func(t *testing.T) {
		e.ready(t, "alloc-ready", nil, harness.TimeoutKey, "2s")
		got, w := e.allocate(t, "alloc-ready", harness.Allocation{Mutate: func(gs *unstructured.Unstructured) error {
			a := gs.GetAnnotations()
			a[harness.SdkReadyKey] = a[harness.LastAllocatedKey]
			gs.SetAnnotations(a)
			return nil
		}})
		for what, gs := range map[string]*unstructured.Unstructured{"allocator's answer": got, "stored": e.get(t, "alloc-ready")} {
			mustState(t, what, gs, "Allocating")
			noKeys(t, what, gs, harness.SdkReadyKey)
		}
		warned(t, "readiness annotation in allocation metadata", w, harness.SdkReadyKey)
		gs := e.resolvedBy(t, "alloc-ready", 2*time.Second, slack)
		if harness.State(gs) == "Allocated" || harness.Annotation(gs, harness.OutcomeKey) != "TimedOut" {
			t.Errorf("an allocator-set readiness annotation must not promote: %s", harness.Describe(gs))
		}
	})

	// A Fleet or GameServerSet template carrying it is refused at CREATE.
	t.Run("template-refused", func(t *testing.T) {
		fleet := harness.NewFleet("carrying", 1, map[string]string{harness.EnabledLabel: "true"},
			map[string]string{harness.SdkReadyKey: "true"})
		body, _ := json.Marshal(fleet.Object)
		_, se, err := e.cp.Kubectl(harness.User, string(body), "-n", e.ns, "create", "-f", "-")
		if err == nil || !strings.Contains(se, harness.SdkReadyKey) || !strings.Contains(se, "denied the request") {
			t.Errorf("Fleet whose template carries %s: err=%v stderr=%s", harness.SdkReadyKey, err, se)
		}
		gss := fleet.DeepCopy()
		gss.SetKind("GameServerSet")
		_, err = e.cp.Dynamic(t, harness.User).Resource(harness.GameServerSetGVR).Namespace(e.ns).
			Create(harness.Ctx(t), gss, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), harness.SdkReadyKey) {
			t.Errorf("GameServerSet whose template carries %s: err=%v", harness.SdkReadyKey, err)
		}
	})
}

// confirmAs is the SDK's SetAnnotation("allocating-ready", <allocation id>) as dyn.
func confirmAs(t *testing.T, e env, dyn dynamic.Interface, name string) (string, error) {
	t.Helper()
	gs, err := harness.SDKGet(harness.Ctx(t), dyn, e.ns, name)
	if err != nil {
		return "", err
	}
	id := harness.Annotation(gs, harness.AllocationKey)
	_, err = harness.SDKSetAnnotation(harness.Ctx(t), dyn, e.ns, name, "allocating-ready", id)
	return id, err
}

// --sdk-service-account names the SDK's service account (Agones' Helm value
// agones.serviceaccount.sdk.name): with it set to game-sdk, the namespace's game-sdk confirms and
// its agones-sdk is just another identity.
func TestDefect4_SDKServiceAccountFlag(t *testing.T) {
	e := setup(t, "--sdk-service-account=game-sdk")
	custom := e.cp.ServiceAccountSDK(t, e.ns, "game-sdk")
	e.ready(t, "flagged", nil, harness.TimeoutKey, "20s")
	got, _ := e.allocate(t, "flagged", harness.Allocation{})
	_, err := harness.SDKSetAnnotation(harness.Ctx(t), e.sdk.Dyn, e.ns, "flagged", "allocating-ready",
		harness.Annotation(got, harness.AllocationKey))
	wantForbidden(t, "agones-sdk when --sdk-service-account=game-sdk", err, harness.SdkReadyKey, e.sdk.User)
	if _, err := confirmAs(t, e, custom.Dyn, "flagged"); err != nil {
		t.Fatalf("SetAnnotation as %s: %v", custom.User, err)
	}
	e.waitState(t, "flagged", "Allocated", 3*time.Second)
}
