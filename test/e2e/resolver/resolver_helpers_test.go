// Package resolver runs the webhook WITH its resolver (a kubeconfig, leader election) against a
// real kube-apiserver, with game-server stand-ins (package standin) acting for the Agones SDK,
// and checks issue 5's end-to-end scenarios.
package resolver

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agones-allocating-webhook/e2e/harness"
	"github.com/agones-allocating-webhook/e2e/standin"
)

func TestMain(m *testing.M) { harness.Main(m) }

// period is the probe period the tests use (the webhook's default is 250ms).
const period = 250 * time.Millisecond

type env struct {
	cp  *harness.ControlPlane
	ns  string
	wh  *harness.Webhook
	sdk *harness.SDK // the namespace's own SDK identity: every game-server write goes through it
}

// setup: CRD accepts Allocating, one webhook+resolver registered, a fresh namespace.
func setup(t *testing.T) env {
	t.Helper()
	cp := harness.Setup(t)
	cp.AddAllocatingToEnum(t)
	wh := cp.StartResolver(t, "resolver")
	ns := cp.Namespace(t)
	return env{cp: cp, ns: ns, wh: wh, sdk: cp.SDK(t, ns)}
}

// standIn starts a stand-in and closes it at the end of the test.
func standIn(t *testing.T) *standin.Server {
	t.Helper()
	s, err := standin.Listen()
	if err != nil {
		t.Fatalf("stand-in: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// readyGameServer creates an opted-in GameServer with the annotations and moves it to Ready with
// address 127.0.0.1 and the stand-in's ports (game/udp, tcp, http), as Agones would.
func (e env) readyGameServer(t *testing.T, name string, s *standin.Server, annotations ...string) {
	t.Helper()
	ctx := harness.Ctx(t)
	c := e.cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(e.ns)
	gs := harness.NewGameServer(name, true, annotations...)
	if s != nil {
		_ = unstructured.SetNestedSlice(gs.Object, standin.SpecPorts(), "spec", "ports")
	}
	created, err := c.Create(ctx, gs, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	_ = unstructured.SetNestedField(created.Object, "Ready", "status", "state")
	_ = unstructured.SetNestedField(created.Object, "127.0.0.1", "status", "address")
	ports := []interface{}{map[string]interface{}{"name": "default", "port": int64(7654)}}
	if s != nil {
		ports = s.Ports()
	}
	_ = unstructured.SetNestedSlice(created.Object, ports, "status", "ports")
	if _, err := c.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("move %s to Ready: %v", name, err)
	}
}

// allocate does what the Agones allocator does and checks the gate held the server.
func (e env) allocate(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	got, err := harness.AllocateLikeAgones(harness.Ctx(t), e.cp.Dynamic(t, harness.AgonesController), e.ns, name, nil, nil)
	if err != nil {
		t.Fatalf("allocate %s: %v", name, err)
	}
	if harness.State(got) != "Allocating" {
		t.Fatalf("allocate %s: want Allocating, got %s", name, harness.Describe(got))
	}
	return got
}

// confirm is the game server's SetAnnotation("allocating-ready", <allocation id>).
func (e env) confirm(t *testing.T, name string) string {
	t.Helper()
	id, err := standin.ConfirmReady(harness.Ctx(t), e.sdk.Dyn, e.ns, name)
	if err != nil {
		t.Fatalf("confirm %s: %v", name, err)
	}
	return id
}

func (e env) get(t *testing.T, name string) *unstructured.Unstructured {
	return e.cp.GetGameServer(t, e.ns, name)
}

// waitState polls every 20ms and returns the object and when the state was first seen.
func (e env) waitState(t *testing.T, name, state string, timeout time.Duration) (*unstructured.Unstructured, time.Time) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var gs *unstructured.Unstructured
	for {
		gs = e.get(t, name)
		if harness.State(gs) == state {
			return gs, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: want state %s within %v, have %s\nwebhook log tail:\n%s", name, state, timeout,
				harness.Describe(gs), e.wh.LogTail(30))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stays checks the server stays in state for d.
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

func (e env) events(t *testing.T, name string) []corev1.Event {
	t.Helper()
	list, err := e.cp.Clientset(t, harness.Admin).CoreV1().Events(e.ns).List(context.Background(),
		metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp) })
	return list.Items
}

// waitEvent waits for an Event with the reason about the GameServer and returns it.
func (e env) waitEvent(t *testing.T, name, reason string, timeout time.Duration) corev1.Event {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, ev := range e.events(t, name) {
			if ev.Reason == reason {
				return ev
			}
		}
		if time.Now().After(deadline) {
			var have []string
			for _, ev := range e.events(t, name) {
				have = append(have, fmt.Sprintf("%s/%s: %s", ev.Type, ev.Reason, ev.Message))
			}
			t.Fatalf("%s: no %s Event within %v; have %v", name, reason, timeout, have)
		}
		time.Sleep(100 * time.Millisecond)
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
