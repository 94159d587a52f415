package harness

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// Contract keys used by the tests (webhook/contract/keys.h is the source of truth).
const (
	EnabledLabel      = "allocating.agones.dev/enabled"
	TimeoutKey        = "allocating.agones.dev/timeout"
	OnTimeoutKey      = "allocating.agones.dev/on-timeout"
	ModeKey           = "allocating.agones.dev/mode"
	OnScaleDownKey    = "allocating.agones.dev/on-scale-down"
	RequireAnnotation = "allocating.agones.dev/require-annotation"
	ProbePortKey      = "allocating.agones.dev/probe-port"
	ProbeTypeKey      = "allocating.agones.dev/probe-type"
	ProbePathKey      = "allocating.agones.dev/probe-path"
	ProbePeriodKey    = "allocating.agones.dev/probe-period"
	SdkReadyKey       = "agones.dev/sdk-allocating-ready"
	LastAllocatedKey  = "agones.dev/last-allocated"
	SinceKey          = "allocating.agones.dev/since"
	AllocationKey     = "allocating.agones.dev/allocation"
	ConfirmedKey      = "allocating.agones.dev/confirmed"
	OutcomeKey        = "allocating.agones.dev/outcome"
	// ShutdownRequestedKey: the webhook recorded a held scale-down Shutdown (applied when the server
	// leaves the allocation cycle).
	ShutdownRequestedKey = "allocating.agones.dev/shutdown-requested"
	// The allocation gateway's delivery marks (docs/gateway.md, "No server lost").
	AnswerByKey      = "allocating.agones.dev/answer-by"
	RequestKeyKey    = "allocating.agones.dev/request-key"
	DeliveredKey     = "allocating.agones.dev/delivered"
	OnUndeliveredKey = "allocating.agones.dev/on-undelivered"
	// IdempotencyHeader: the gateway's idempotency key (gRPC metadata x-allocating-idempotency-key).
	IdempotencyHeader = "X-Allocating-Idempotency-Key"
)

// NewGameServer is a minimal valid GameServer (one UDP port "default", one container). optIn adds
// the label allocating.agones.dev/enabled=true. Annotations are optional key, value pairs.
func NewGameServer(name string, optIn bool, annotations ...string) *unstructured.Unstructured {
	gs := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "agones.dev/v1",
		"kind":       "GameServer",
		"metadata":   map[string]interface{}{"name": name},
		"spec": map[string]interface{}{
			"ports": []interface{}{map[string]interface{}{
				"name": "default", "portPolicy": "Dynamic", "containerPort": int64(7654), "protocol": "UDP",
			}},
			"template": map[string]interface{}{"spec": map[string]interface{}{
				"containers": []interface{}{map[string]interface{}{"name": "game", "image": "example/game:1"}},
			}},
		},
	}}
	if optIn {
		gs.SetLabels(map[string]string{EnabledLabel: "true"})
	}
	if len(annotations) > 0 {
		a := map[string]string{}
		for i := 0; i+1 < len(annotations); i += 2 {
			a[annotations[i]] = annotations[i+1]
		}
		gs.SetAnnotations(a)
	}
	return gs
}

// NewFleet is a Fleet whose GameServer template carries templateLabels/templateAnnotations.
func NewFleet(name string, replicas int64, templateLabels, templateAnnotations map[string]string) *unstructured.Unstructured {
	tmpl := NewGameServer("", false)
	meta := map[string]interface{}{}
	if len(templateLabels) > 0 {
		meta["labels"] = toIface(templateLabels)
	}
	if len(templateAnnotations) > 0 {
		meta["annotations"] = toIface(templateAnnotations)
	}
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "agones.dev/v1",
		"kind":       "Fleet",
		"metadata":   map[string]interface{}{"name": name},
		"spec": map[string]interface{}{
			"replicas": replicas,
			"template": map[string]interface{}{"metadata": meta, "spec": tmpl.Object["spec"]},
		},
	}}
}

func toIface(m map[string]string) map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// State is status.state ("" when unset).
func State(u *unstructured.Unstructured) string {
	s, _, _ := unstructured.NestedString(u.Object, "status", "state")
	return s
}

// Annotation returns one annotation ("" when absent).
func Annotation(u *unstructured.Unstructured, key string) string { return u.GetAnnotations()[key] }

// HasAnnotation reports whether the annotation is present.
func HasAnnotation(u *unstructured.Unstructured, key string) bool {
	_, ok := u.GetAnnotations()[key]
	return ok
}

// CreateReadyGameServer creates gs in ns (as admin) and moves it to Ready with an address and port,
// as Agones would after the pod started (state changes are full UPDATEs: no status subresource).
func (cp *ControlPlane) CreateReadyGameServer(t testing.TB, ns string, gs *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	ready, err := CreateReady(context.Background(), cp.Dynamic(t, Admin), ns, gs)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return ready
}

// CreateReady is CreateReadyGameServer's two writes with the caller's client, returning an error
// instead of failing a test (for the benchmarks' parallel creation).
func CreateReady(ctx context.Context, dyn dynamic.Interface, ns string, gs *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	c := dyn.Resource(GameServerGVR).Namespace(ns)
	created, err := c.Create(ctx, gs, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create GameServer %s/%s: %v", ns, gs.GetName(), err)
	}
	_ = unstructured.SetNestedField(created.Object, "Ready", "status", "state")
	_ = unstructured.SetNestedField(created.Object, "127.0.0.1", "status", "address")
	_ = unstructured.SetNestedSlice(created.Object, []interface{}{
		map[string]interface{}{"name": "default", "port": int64(7654)},
	}, "status", "ports")
	ready, err := c.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("move GameServer %s/%s to Ready: %v", ns, gs.GetName(), err)
	}
	if State(ready) != "Ready" {
		return nil, fmt.Errorf("GameServer %s/%s: state %q after the Ready update", ns, gs.GetName(), State(ready))
	}
	return ready, nil
}

// CreateReadyMany creates opted-in GameServers named prefix-NNNN (n of them, with the given
// annotations) and moves each to Ready as CreateReady does, `parallel` at a time. It returns the
// names and one error per server that could not be made.
func CreateReadyMany(ctx context.Context, dyn dynamic.Interface, ns, prefix string, n, parallel int, annotations ...string) ([]string, []error) {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	work := make(chan string)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for w := 0; w < parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range work {
				if _, err := CreateReady(ctx, dyn, ns, NewGameServer(name, true, annotations...)); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, name := range names {
		work <- name
	}
	close(work)
	wg.Wait()
	return names, errs
}

// EscapeJSONPointer escapes one RFC 6901 reference token ("~" -> "~0", "/" -> "~1").
func EscapeJSONPointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// GetGameServer reads a GameServer as admin.
func (cp *ControlPlane) GetGameServer(t testing.TB, ns, name string) *unstructured.Unstructured {
	t.Helper()
	gs, err := cp.Dynamic(t, Admin).Resource(GameServerGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get GameServer %s/%s: %v", ns, name, err)
	}
	return gs
}

// WaitForState polls the GameServer until status.state == state or the timeout passes.
func (cp *ControlPlane) WaitForState(t testing.TB, ns, name, state string, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		gs := cp.GetGameServer(t, ns, name)
		if last = State(gs); last == state {
			return gs
		}
		if time.Now().After(deadline) {
			t.Fatalf("GameServer %s/%s: state %q, want %q after %v", ns, name, last, state, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Describe is a short one-line summary of a GameServer for failure messages.
func Describe(u *unstructured.Unstructured) string {
	if u == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s/%s state=%q rv=%s labels=%v annotations=%v", u.GetNamespace(), u.GetName(),
		State(u), u.GetResourceVersion(), u.GetLabels(), u.GetAnnotations())
}
