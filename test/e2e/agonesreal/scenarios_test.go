package agonesreal

// The scenarios after the gate and confirmation (agones_test.go): a timeout, a rolling update with
// a server held and one playing, the Buffer webhook, the gateway over REST and gRPC in front of
// the real agones-allocator with a client that gives up, and the admission outage.

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	pb "github.com/agones-allocating-webhook/e2e/grpcapi/allocation"
	"github.com/agones-allocating-webhook/e2e/harness"
)

var (
	fasGVR = schema.GroupVersionResource{Group: "autoscaling.agones.dev", Version: "v1", Resource: "fleetautoscalers"}
	gssGVR = schema.GroupVersionResource{Group: "agones.dev", Version: "v1", Resource: "gameserversets"}
)

// allocate allocates one server of the Fleet through the real agones-allocator (REST) and checks
// the gate held it: it returns the server's name, its allocation id and its port.
func (e *env) allocate(t *testing.T, fleet string) (string, string, int) {
	t.Helper()
	client := harness.HTTPSClient(t, e.ag.AllocatorCA, e.ag.ClientCert, e.ag.ClientKey)
	a, code, body, err := allocateREST(harness.Ctx(t), client, e.ag.AllocatorURL, e.ns, fleet)
	if err != nil || a == nil || len(a.Ports) == 0 {
		t.Fatalf("allocate through agones-allocator: %v (HTTP %d) %s; servers: %s", err, code, body, e.servers(t))
	}
	gs := e.cp.GetGameServer(t, e.ns, a.GameServerName)
	if harness.State(gs) != "Allocating" {
		t.Fatalf("allocated server not held: %s", harness.Describe(gs))
	}
	return a.GameServerName, harness.Annotation(gs, harness.AllocationKey), a.Ports[0].Port
}

// confirm is the game server's confirmation through the real SDK: the simple-game-server's
// ANNOTATION command, i.e. SDK SetAnnotation("allocating-ready", id) through its sidecar.
func confirm(t *testing.T, port int, id string) time.Time {
	t.Helper()
	if got := command(t, port, "ANNOTATION allocating-ready "+id); !strings.Contains(got, "ACK") {
		t.Fatalf("simple-game-server answered %q", got)
	}
	return time.Now()
}

// waitState waits for a state and returns how long it took from `from`.
func (e *env) waitState(t *testing.T, name, state string, from time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	var last *unstructured.Unstructured
	if !harness.Poll(timeout, 20*time.Millisecond, func() bool {
		gs, err := e.cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(e.ns).Get(harness.Ctx(t), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		last = gs
		return harness.State(gs) == state
	}) {
		desc := "gone"
		if last != nil {
			desc = harness.Describe(last)
		}
		t.Fatalf("%s not %s within %s: %s\nresolver:\n%s", name, state, timeout, desc, e.wh.LogTail(20))
	}
	return time.Since(from)
}

// gone waits until the GameServer is deleted.
func (e *env) gone(t *testing.T, name string, timeout time.Duration) bool {
	return harness.Poll(timeout, 100*time.Millisecond, func() bool {
		_, err := e.cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(e.ns).Get(harness.Ctx(t), name, metav1.GetOptions{})
		return err != nil
	})
}

// No confirmation: force-resolved at the deadline per on-timeout (Unhealthy), then the real
// GameServerSet controller replaces the Unhealthy server.
func TestTimeoutUnhealthyReplaced(t *testing.T) {
	e := setup(t, Options{})
	e.fleet(t, "late", 2, true, harness.TimeoutKey, "3s", harness.OnTimeoutKey, "Unhealthy")
	e.waitFleetReady(t, "late", 2, 90*time.Second)
	start := time.Now()
	name, _, _ := e.allocate(t, "late")
	// The resolver's write (Unhealthy, outcome TimedOut) is followed within milliseconds by the real
	// GameServerSet controller's Shutdown, so a poll may never see Unhealthy itself: wait for the
	// outcome, which stays, and accept only the states the Unhealthy write leads to.
	var last *unstructured.Unstructured
	if !harness.Poll(20*time.Second, 20*time.Millisecond, func() bool {
		gs, err := e.cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(e.ns).Get(harness.Ctx(t), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		last = gs
		return harness.Annotation(gs, harness.OutcomeKey) == "TimedOut"
	}) {
		t.Fatalf("%s: no outcome TimedOut within 20s: %s\nresolver:\n%s", name, harness.Describe(last), e.wh.LogTail(20))
	}
	took := time.Since(start)
	if st := harness.State(last); st != "Unhealthy" && st != "Shutdown" {
		t.Fatalf("%s: outcome TimedOut in state %q, want Unhealthy (or Shutdown, the controller's next step)", name, st)
	}
	t.Logf("allocation → outcome TimedOut after %s (timeout 3s), state %s when seen", took.Round(time.Millisecond), harness.State(last))
	if !e.gone(t, name, 60*time.Second) {
		t.Fatalf("the real controller did not remove the Unhealthy server: %s", harness.Describe(e.cp.GetGameServer(t, e.ns, name)))
	}
	e.waitFleetReady(t, "late", 2, 90*time.Second)
	t.Logf("Unhealthy server deleted and replaced by the real GameServerSet controller %s after the allocation",
		time.Since(start).Round(time.Millisecond))
}

// A rolling update with one server playing (Allocated) and one held Allocating (on-scale-down:
// Hold): the real Fleet/GameServerSet controllers roll the rest; neither server is lost; the held
// one is confirmed and plays.
func TestRollingUpdateHeldAndPlaying(t *testing.T) {
	e := setup(t, Options{})
	e.fleet(t, "roll", 3, true, harness.TimeoutKey, "120s", harness.OnScaleDownKey, "Hold")
	e.waitFleetReady(t, "roll", 3, 120*time.Second)
	playing, pid, pport := e.allocate(t, "roll")
	confirm(t, pport, pid)
	e.waitState(t, playing, "Allocated", time.Now(), 20*time.Second)
	held, hid, hport := e.allocate(t, "roll")
	t.Logf("playing %s (Allocated), held %s (Allocating)", playing, held)

	// The rolling update: a new template.
	dyn := e.cp.Dynamic(t, harness.Admin).Resource(fleetGVR).Namespace(e.ns)
	// (Retried on a conflict: the Fleet controller writes the Fleet too.)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		f, err := dyn.Get(harness.Ctx(t), "roll", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedField(f.Object, "2", "spec", "template", "metadata", "annotations", "example.com/version"); err != nil {
			return err
		}
		_, err = dyn.Update(harness.Ctx(t), f, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatalf("update the Fleet's template: %v", err)
	}
	start := time.Now()
	// The new GameServerSet gets Ready servers; the two allocated ones stay.
	ok := harness.Poll(120*time.Second, 250*time.Millisecond, func() bool {
		list, err := e.cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(e.ns).List(harness.Ctx(t), metav1.ListOptions{})
		if err != nil {
			return false
		}
		newReady := 0
		for _, gs := range list.Items {
			if harness.State(&gs) == "Ready" && gs.GetAnnotations()["example.com/version"] == "2" {
				newReady++
			}
		}
		return newReady >= 1
	})
	if !ok {
		t.Fatalf("no Ready server of the new template 120s after the update: %s", e.servers(t))
	}
	t.Logf("first Ready server of the new template after %s: %s", time.Since(start).Round(time.Millisecond), e.servers(t))
	time.Sleep(5 * time.Second) // let the controllers act on the old set
	for _, n := range []string{playing, held} {
		gs := e.cp.GetGameServer(t, e.ns, n)
		if gs.GetDeletionTimestamp() != nil || (n == playing && harness.State(gs) != "Allocated") ||
			(n == held && harness.State(gs) != "Allocating") {
			t.Fatalf("%s lost to the rolling update: %s", n, harness.Describe(gs))
		}
	}
	gs := e.cp.GetGameServer(t, e.ns, held)
	t.Logf("held server during the update: state %s, %s=%q", harness.State(gs), harness.ShutdownRequestedKey,
		harness.Annotation(gs, harness.ShutdownRequestedKey))
	sent := confirm(t, hport, hid)
	took := e.waitState(t, held, "Allocated", sent, 20*time.Second)
	t.Logf("held server confirmed during the rolling update → Allocated in %s", took.Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	for _, n := range []string{playing, held} {
		if gs := e.cp.GetGameServer(t, e.ns, n); harness.State(gs) != "Allocated" || gs.GetDeletionTimestamp() != nil {
			t.Fatalf("%s lost after the rolling update: %s", n, harness.Describe(gs))
		}
	}
	fl, _ := dyn.Get(harness.Ctx(t), "roll", metav1.GetOptions{})
	st, _, _ := unstructured.NestedMap(fl.Object, "status")
	t.Logf("Fleet status after the update: %v; servers: %s", st, e.servers(t))
	sets, err := e.cp.Dynamic(t, harness.Admin).Resource(gssGVR).Namespace(e.ns).List(harness.Ctx(t), metav1.ListOptions{})
	if err == nil {
		for _, s := range sets.Items {
			r, _, _ := unstructured.NestedInt64(s.Object, "spec", "replicas")
			st, _, _ := unstructured.NestedMap(s.Object, "status")
			t.Logf("GameServerSet %s: spec.replicas %d, status %v", s.GetName(), r, st)
		}
	}
}

// The Buffer webhook: a FleetAutoscaler with a Webhook policy pointing at the webhook's
// /autoscale/buffer; two servers held Allocating count as allocated, so the real autoscaler
// grows the Fleet to keep the buffer Ready (Agones' own Buffer policy would leave 0 Ready).
func TestBufferWebhookAutoscaler(t *testing.T) {
	e := setup(t, Options{}, "--autoscale-buffer")
	e.fleet(t, "buf", 2, true, harness.TimeoutKey, "120s")
	e.waitFleetReady(t, "buf", 2, 90*time.Second)
	ca, err := os.ReadFile(e.wh.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	fas := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "autoscaling.agones.dev/v1", "kind": "FleetAutoscaler",
		"metadata": map[string]interface{}{"name": "buf", "namespace": e.ns},
		"spec": map[string]interface{}{
			"fleetName": "buf",
			"policy": map[string]interface{}{"type": "Webhook", "webhook": map[string]interface{}{
				"url":      fmt.Sprintf("https://127.0.0.1:%d/autoscale/buffer?bufferSize=2&minReplicas=2&maxReplicas=10", e.wh.Port),
				"caBundle": base64.StdEncoding.EncodeToString(ca),
			}},
			"sync": map[string]interface{}{"type": "FixedInterval", "fixedInterval": map[string]interface{}{"seconds": int64(1)}},
		},
	}}
	if _, err := e.cp.Dynamic(t, harness.Admin).Resource(fasGVR).Namespace(e.ns).Create(harness.Ctx(t), fas, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create FleetAutoscaler: %v", err)
	}
	e.allocate(t, "buf")
	e.allocate(t, "buf")
	start := time.Now()
	var replicas int64
	if !harness.Poll(30*time.Second, 100*time.Millisecond, func() bool {
		fl, err := e.cp.Dynamic(t, harness.Admin).Resource(fleetGVR).Namespace(e.ns).Get(harness.Ctx(t), "buf", metav1.GetOptions{})
		if err == nil {
			replicas, _, _ = unstructured.NestedInt64(fl.Object, "spec", "replicas")
		}
		return replicas == 4
	}) {
		t.Fatalf("Fleet spec.replicas %d, want 4 (2 Allocating + buffer 2); servers: %s", replicas, e.servers(t))
	}
	scaled := time.Since(start)
	e.waitFleetReady(t, "buf", 2, 60*time.Second)
	t.Logf("2 Allocating + buffer 2: the real FleetAutoscaler (Webhook policy, 1 s sync) set replicas 4 after %s, 2 Ready again after %s",
		scaled.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	fs, _ := e.cp.Dynamic(t, harness.Admin).Resource(fasGVR).Namespace(e.ns).Get(harness.Ctx(t), "buf", metav1.GetOptions{})
	st, _, _ := unstructured.NestedMap(fs.Object, "status")
	t.Logf("FleetAutoscaler status: %v", st)
}

// gateway starts allocation-gateway in front of the real agones-allocator; returns a REST client
// and a gRPC connection of a matchmaker.
func (e *env) gateway(t *testing.T) (*harness.Webhook, *http.Client, *grpc.ClientConn) {
	t.Helper()
	clientCA := harness.NewTestCA(t, e.ag.Dir+"/matchmakers", "matchmaker-ca")
	gw := e.cp.StartGatewayTo(t, "gateway", harness.Upstream{URL: e.ag.AllocatorURL, CAFile: e.ag.AllocatorCA,
		ClientCert: e.ag.ClientCert, ClientKey: e.ag.ClientKey}, clientCA.CAFile)
	crt, key := clientCA.Issue(t, "director", "director", false)
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", gw.Port),
		grpc.WithTransportCredentials(credentials.NewTLS(harness.ClientTLS(t, gw.CAFile, crt, key))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return gw, harness.HTTPSClient(t, gw.CAFile, crt, key), conn
}

// confirmWhenAllocating plays the game server for one allocation: the first server of the
// namespace seen Allocating is confirmed through its simple-game-server, after `load`.
func (e *env) confirmWhenAllocating(t *testing.T, load time.Duration, done <-chan struct{}) {
	seen := map[string]bool{}
	for {
		select {
		case <-done:
			return
		case <-time.After(50 * time.Millisecond):
		}
		list, err := e.cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(e.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, gs := range list.Items {
			id := harness.Annotation(&gs, harness.AllocationKey)
			if harness.State(&gs) != "Allocating" || id == "" || seen[id] {
				continue
			}
			seen[id] = true
			ports, _, _ := unstructured.NestedSlice(gs.Object, "status", "ports")
			if len(ports) == 0 {
				continue
			}
			port, _, _ := unstructured.NestedInt64(ports[0].(map[string]interface{}), "port")
			time.Sleep(load)
			_ = confirmQuiet(int(port), id)
		}
	}
}

func confirmQuiet(port int, id string) error {
	c, err := net.Dial("udp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte("ANNOTATION allocating-ready " + id + "\n"))
	return err
}

// countLost: servers that are Allocated without the gateway's delivery mark (nobody was told)
// or still Allocating long after the test's calls ended.
func (e *env) countLost(t *testing.T) (lost []string, summary string) {
	list, err := e.cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(e.ns).List(harness.Ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, gs := range list.Items {
		s := harness.State(&gs)
		parts = append(parts, fmt.Sprintf("%s=%s(outcome=%s,delivered=%s)", gs.GetName(), s,
			harness.Annotation(&gs, harness.OutcomeKey), harness.Annotation(&gs, harness.DeliveredKey)))
		if (s == "Allocated" && harness.Annotation(&gs, harness.DeliveredKey) == "") || s == "Allocating" {
			lost = append(lost, gs.GetName())
		}
	}
	return lost, strings.Join(parts, " ")
}

// The gateway over REST and gRPC in front of the real agones-allocator: a confirmed allocation
// is answered (both faces); a client that gives up mid-call (REST timeout, gRPC cancellation)
// leaves no server lost: the resolver releases it, the real controller replaces it.
func TestGatewayInFrontOfRealAllocator(t *testing.T) {
	e := setup(t, Options{})
	e.fleet(t, "gw", 5, true, harness.TimeoutKey, "30s")
	e.waitFleetReady(t, "gw", 5, 90*time.Second)
	gw, rest, conn := e.gateway(t)

	// REST, confirmed after 1 s of loading.
	done := make(chan struct{})
	go e.confirmWhenAllocating(t, time.Second, done)
	start := time.Now()
	a, code, raw, err := allocateREST(harness.Ctx(t), rest, fmt.Sprintf("https://127.0.0.1:%d", gw.Port), e.ns, "gw")
	close(done)
	if err != nil || a == nil {
		t.Fatalf("REST through the gateway: %v HTTP %d %s\ngateway:\n%s", err, code, raw, gw.LogTail(30))
	}
	gs := e.cp.GetGameServer(t, e.ns, a.GameServerName)
	if harness.State(gs) != "Allocated" || harness.Annotation(gs, harness.DeliveredKey) == "" {
		t.Fatalf("REST answer names a server that is not Allocated and delivered: %s", harness.Describe(gs))
	}
	t.Logf("REST via the gateway: answered after %s (1 s load + confirmation) with %s, Allocated", time.Since(start).Round(time.Millisecond), a.GameServerName)

	// gRPC, confirmed after 1 s.
	done = make(chan struct{})
	go e.confirmWhenAllocating(t, time.Second, done)
	start = time.Now()
	ctx, cancel := context.WithTimeout(harness.Ctx(t), 30*time.Second)
	res, err := pb.NewAllocationServiceClient(conn).Allocate(ctx, &pb.AllocationRequest{Namespace: e.ns,
		GameServerSelectors: []*pb.GameServerSelector{{MatchLabels: map[string]string{"agones.dev/fleet": "gw"}}}})
	cancel()
	close(done)
	if err != nil {
		t.Fatalf("gRPC through the gateway: %v\ngateway:\n%s", err, gw.LogTail(30))
	}
	gs = e.cp.GetGameServer(t, e.ns, res.GetGameServerName())
	if harness.State(gs) != "Allocated" || harness.Annotation(gs, harness.DeliveredKey) == "" {
		t.Fatalf("gRPC answer names a server that is not Allocated and delivered: %s", harness.Describe(gs))
	}
	t.Logf("gRPC via the gateway: answered after %s with %s, Allocated", time.Since(start).Round(time.Millisecond), res.GetGameServerName())

	// Clients that give up mid-call (no confirmation comes): REST with a 2 s client timeout, gRPC
	// with a 2 s deadline, gRPC cancelled after 2 s. A watcher records every server seen Allocating meanwhile and what
	// became of it.
	seen := e.watchServers(t)
	impatient := *rest
	impatient.Timeout = 2 * time.Second
	if a, code, raw, err := allocateREST(harness.Ctx(t), &impatient, fmt.Sprintf("https://127.0.0.1:%d", gw.Port), e.ns, "gw"); err == nil {
		t.Fatalf("REST answered before the client gave up: %v %d %s", a, code, raw)
	}
	grpcReq := &pb.AllocationRequest{Namespace: e.ns,
		GameServerSelectors: []*pb.GameServerSelector{{MatchLabels: map[string]string{"agones.dev/fleet": "gw"}}}}
	// gRPC with a 2 s deadline: the gateway reads grpc-timeout and answers just before it,
	// ResourceExhausted ("not confirmed playable within the deadline"), releasing the server.
	gctx, gcancel := context.WithTimeout(harness.Ctx(t), 2*time.Second)
	_, err = pb.NewAllocationServiceClient(conn).Allocate(gctx, grpcReq)
	gcancel()
	if c := status.Code(err); c != codes.ResourceExhausted && c != codes.DeadlineExceeded {
		t.Fatalf("gRPC with a 2 s deadline: want ResourceExhausted (or the client's DeadlineExceeded), got %v", err)
	}
	t.Logf("gRPC, 2 s deadline: %v", err)
	// gRPC without a deadline, cancelled by the client after 2 s (RST_STREAM).
	gctx, gcancel = context.WithCancel(harness.Ctx(t))
	time.AfterFunc(2*time.Second, gcancel)
	_, err = pb.NewAllocationServiceClient(conn).Allocate(gctx, grpcReq)
	if status.Code(err) != codes.Canceled {
		t.Fatalf("gRPC cancelled by the client: want Canceled, got %v", err)
	}
	gaveUp := time.Now()
	var abandoned []string
	ok := harness.Poll(60*time.Second, 250*time.Millisecond, func() bool {
		abandoned = abandoned[:0]
		done := true
		for name, h := range seen.snapshot() {
			if !h.allocating {
				continue
			}
			abandoned = append(abandoned, name)
			// Released: the resolver's Shutdown (outcome Undelivered), then deleted by Agones.
			if !(h.gone && h.outcome == "Undelivered") {
				done = false
			}
		}
		return done && len(abandoned) == 3
	})
	if !ok {
		t.Fatalf("the 3 abandoned allocations were not both released (Undelivered) and removed: %v\nresolver:\n%s",
			seen.snapshot(), e.wh.LogTail(30))
	}
	lost, summary := e.countLost(t)
	if len(lost) != 0 {
		t.Fatalf("servers lost: %v; %s", lost, summary)
	}
	t.Logf("the 3 abandoned allocations (%v) released (outcome Undelivered) and deleted by the real controller %s after the clients gave up",
		abandoned, time.Since(gaveUp).Round(time.Millisecond))
	e.waitFleetReady(t, "gw", 3, 90*time.Second) // 5 - 2 delivered: the released ones were replaced
	t.Logf("Fleet back to 3 Ready + 2 Allocated %s after the clients gave up; %s", time.Since(gaveUp).Round(time.Millisecond), summary)
}

// history: what a watcher saw of one GameServer.
type history struct {
	allocating bool   // seen Allocating
	outcome    string // last allocating.agones.dev/outcome seen
	gone       bool   // deleted
}

type serverWatch struct {
	mu sync.Mutex
	h  map[string]*history
}

func (w *serverWatch) snapshot() map[string]history {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]history{}
	for k, v := range w.h {
		out[k] = *v
	}
	return out
}

// watchServers records, until the test ends, every GameServer of the namespace seen Allocating
// from now on, its outcome and its deletion.
func (e *env) watchServers(t *testing.T) *serverWatch {
	w := &serverWatch{h: map[string]*history{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	wi, err := e.cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(e.ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range wi.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			w.mu.Lock()
			h := w.h[u.GetName()]
			if h == nil {
				h = &history{}
				w.h[u.GetName()] = h
			}
			if harness.State(u) == "Allocating" {
				h.allocating = true
			}
			if o := harness.Annotation(u, harness.OutcomeKey); o != "" {
				h.outcome = o
			}
			if ev.Type == watch.Deleted {
				h.gone = true
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// The admission outage with the failurePolicy as shipped (Ignore): the webhook process is
// killed; an allocation through the real allocator goes straight to Allocated (stock Agones);
// with the webhook back the resolver records the bypass and the real SDK confirms it after the
// fact (docs/install.md, failurePolicy; docs/operations.md, admission bypass).
func TestAdmissionOutage(t *testing.T) {
	e := setup(t, Options{})
	e.fleet(t, "out", 2, true, harness.TimeoutKey, "60s")
	e.waitFleetReady(t, "out", 2, 90*time.Second)
	if err := e.wh.Stop(syscall.SIGKILL); err != nil {
		t.Logf("stop webhook: %v", err)
	}
	client := harness.HTTPSClient(t, e.ag.AllocatorCA, e.ag.ClientCert, e.ag.ClientKey)
	start := time.Now()
	a, code, body, err := allocateREST(harness.Ctx(t), client, e.ag.AllocatorURL, e.ns, "out")
	if err != nil || a == nil {
		t.Fatalf("allocation during the outage: %v (HTTP %d) %s", err, code, body)
	}
	gs := e.cp.GetGameServer(t, e.ns, a.GameServerName)
	if harness.State(gs) != "Allocated" {
		t.Fatalf("during the outage (failurePolicy Ignore) the allocation should go through ungated: %s", harness.Describe(gs))
	}
	t.Logf("webhook down: agones-allocator answered in %s, %s straight to Allocated (fail open, as documented)",
		time.Since(start).Round(time.Millisecond), a.GameServerName)
	back := time.Now()
	e.wh = e.cp.StartResolver(t, "resolver-2")
	var id string
	if !harness.Poll(30*time.Second, 100*time.Millisecond, func() bool {
		g := e.cp.GetGameServer(t, e.ns, a.GameServerName)
		id = harness.Annotation(g, harness.AllocationKey)
		return harness.Annotation(g, "allocating.agones.dev/bypassed") != "" && id != ""
	}) {
		t.Fatalf("the resolver did not record the bypass: %s\n%s", harness.Describe(e.cp.GetGameServer(t, e.ns, a.GameServerName)), e.wh.LogTail(20))
	}
	t.Logf("bypass recorded %s after the webhook's restart began (start, registration, leadership included)", time.Since(back).Round(time.Millisecond))
	sent := confirm(t, a.Ports[0].Port, id)
	if !harness.Poll(20*time.Second, 50*time.Millisecond, func() bool {
		return harness.Annotation(e.cp.GetGameServer(t, e.ns, a.GameServerName), harness.ConfirmedKey) != ""
	}) {
		t.Fatalf("not confirmed after the fact: %s", harness.Describe(e.cp.GetGameServer(t, e.ns, a.GameServerName)))
	}
	gs = e.cp.GetGameServer(t, e.ns, a.GameServerName)
	t.Logf("confirmed after the fact %s after the SDK write (state %s, outcome %q)", time.Since(sent).Round(time.Millisecond),
		harness.State(gs), harness.Annotation(gs, harness.OutcomeKey))
	if harness.State(gs) != "Allocated" {
		t.Fatalf("bypassed server left Allocated: %s", harness.Describe(gs))
	}
	// With the webhook back, the next allocation is gated again.
	name, _, _ := e.allocate(t, "out")
	t.Logf("after the outage: %s gated (Allocating) again", name)
}
