// Package gateway runs allocation-gateway (issue 11) in front of a stand-in agones-allocator
// (harness.StartAllocatorStandin: REST over mTLS, the real allocator's full UPDATE) on a real
// kube-apiserver with the webhook and its resolver running, and checks what a matchmaker sees.
package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agones-allocating-webhook/e2e/harness"
	"github.com/agones-allocating-webhook/e2e/standin"
)

func TestMain(m *testing.M) { harness.Main(m) }

type env struct {
	cp        *harness.ControlPlane
	ns        string
	wh        *harness.Webhook // webhook + resolver
	sdk       *harness.SDK
	alloc     *harness.AllocatorStandin
	gw        *harness.Webhook // the gateway process
	clientCA  *harness.TestCA  // CA the gateway trusts for client certificates
	client    *http.Client     // a matchmaker with a good client certificate
	servingCA string
}

var (
	shared     *env
	sharedOnce sync.Once
)

// setup: one webhook+resolver, one stand-in allocator, one gateway for the whole package (each
// test uses its own namespace through the request's `namespace`).
func setup(t *testing.T) *env { return sharedEnv(t, &sharedOnce, &shared, "gateway") }

// sharedEnv: the processes of a harness.GatewayStack started once (by the first test to ask, and
// stopped when that test ends), then for each caller its own namespace and SDK identity.
func sharedEnv(t *testing.T, once *sync.Once, slot **env, name string, gatewayArgs ...string) *env {
	t.Helper()
	cp := harness.Setup(t)
	once.Do(func() {
		s := cp.StartGatewayStack(t, name, append([]string{"--max-body-bytes=65536"}, gatewayArgs...)...)
		*slot = &env{cp: cp, wh: s.Resolver, alloc: s.Allocator, gw: s.Gateway, clientCA: s.ClientCA,
			client: s.Client, servingCA: s.ServingCA}
	})
	if *slot == nil {
		t.Fatal("package setup failed in an earlier test")
	}
	e := **slot
	e.ns = cp.Namespace(t)
	e.sdk = cp.SDK(t, e.ns)
	return &e
}

// One parent test owns the processes (their t.Cleanup runs when it ends); each subtest has its
// own namespace.
func TestGateway(t *testing.T) {
	setup(t)
	t.Run("Confirmed", testConfirmed)
	t.Run("TimedOutThenRetried", testTimedOutThenRetried)
	t.Run("UnhealthyThenRetried", testUnhealthyThenRetried)
	t.Run("DeletedThenRetried", testDeletedThenRetried)
	t.Run("NotGatedAnsweredAtOnce", testNotGated)
	t.Run("NoServer429", testNoServer)
	t.Run("MalformedRequest400", testMalformed)
	t.Run("RequestOverSize413", testOverSize)
	t.Run("BadClientCertificateRefused", testBadClientCert)
	t.Run("DeadlineHeader", testDeadlineHeader)
	// Issue 23.
	t.Run("ClientGoneNoticed", testClientGone)
	t.Run("DeepNesting400", testDeepNesting)
	t.Run("InvalidRequestPassedOn", testInvalidRequestPassedOn)
	t.Run("ServerInPolicyNamespace", testServerInPolicyNamespace)
	t.Run("RemoteSourcePassedThrough", testRemoteSourcePassedThrough)
	t.Run("VariantGateway", testVariantGateway)
	t.Run("ShutdownKeepsAnsweringWaiters", testShutdownKeepsAnsweringWaiters)
	t.Run("ShutdownDrainDelay", testShutdownDrainDelay)
	// Issue 23, no server lost (delivery_test.go).
	t.Run("DeliveredStaysAllocated", testDeliveredStaysAllocated)
	t.Run("ClientGoneReleased", testClientGoneReleased)
	t.Run("DeadlineReleased", testDeadlineReleased)
	t.Run("KilledReplicaReleased", testKilledReplicaReleased)
	t.Run("IdempotentRetryAfterKill", testIdempotentRetryAfterKill)
	t.Run("BadIdempotencyKey400", testBadIdempotencyKey)
	t.Run("ShutdownReleasesLeftovers", testShutdownReleasesLeftovers)
	// Last: it stops the stand-in allocator.
	t.Run("AllocatorDown503", testAllocatorDown)
}

// readyGameServer creates a GameServer (opted in or not) and moves it to Ready as Agones would.
func (e *env) readyGameServer(t *testing.T, name string, optIn bool, annotations ...string) {
	t.Helper()
	ctx := harness.Ctx(t)
	c := e.cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(e.ns)
	created, err := c.Create(ctx, harness.NewGameServer(name, optIn, annotations...), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	_ = unstructured.SetNestedField(created.Object, "Ready", "status", "state")
	_ = unstructured.SetNestedField(created.Object, "127.0.0.1", "status", "address")
	_ = unstructured.SetNestedSlice(created.Object, []interface{}{map[string]interface{}{"name": "default", "port": int64(7654)}}, "status", "ports")
	if _, err := c.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("move %s to Ready: %v", name, err)
	}
}

type answer struct {
	status int
	body   map[string]interface{}
	raw    string
	took   time.Duration
	at     time.Time
}

func (a answer) String() string { return fmt.Sprintf("HTTP %d %s", a.status, a.raw) }

func (a answer) annotation(key string) string {
	md, _ := a.body["metadata"].(map[string]interface{})
	ann, _ := md["annotations"].(map[string]interface{})
	v, _ := ann[key].(string)
	return v
}

func (e *env) post(t *testing.T, c *http.Client, body string, headers ...string) (answer, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.gw.URL("/gameserverallocation"), bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	start := time.Now()
	res, err := c.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, raw: string(raw), took: time.Since(start), at: time.Now()}
	_ = json.Unmarshal(raw, &a.body)
	return a, nil
}

func (e *env) allocate(t *testing.T, headers ...string) answer {
	t.Helper()
	a, err := e.post(t, e.client, fmt.Sprintf(`{"namespace":%q}`, e.ns), headers...)
	if err != nil {
		t.Fatalf("POST /gameserverallocation: %v", err)
	}
	return a
}

// allocateAsync posts in a goroutine; the channel receives the answer.
func (e *env) allocateAsync(t *testing.T, headers ...string) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		a, err := e.post(t, e.client, fmt.Sprintf(`{"namespace":%q}`, e.ns), headers...)
		if err != nil {
			a = answer{status: -1, raw: err.Error()}
		}
		ch <- a
	}()
	return ch
}

func (e *env) waitState(t *testing.T, name, state string, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	var gs *unstructured.Unstructured
	if !harness.Poll(timeout, 20*time.Millisecond, func() bool {
		gs = e.cp.GetGameServer(t, e.ns, name)
		return harness.State(gs) == state
	}) {
		t.Fatalf("%s: want %s within %v, have %s", name, state, timeout, harness.Describe(gs))
	}
	return gs
}

func (e *env) confirm(t *testing.T, name string) string {
	t.Helper()
	id, err := standin.ConfirmReady(harness.Ctx(t), e.sdk.Dyn, e.ns, name)
	if err != nil {
		t.Fatalf("confirm %s: %v", name, err)
	}
	return id
}

func expectPending(t *testing.T, ch <-chan answer, d time.Duration) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("answered before the server was playable: %s", a)
	case <-time.After(d):
	}
}

func receive(t *testing.T, ch <-chan answer, timeout time.Duration) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(timeout):
		t.Fatalf("no answer within %v", timeout)
		return answer{}
	}
}

// The matchmaker gets its answer only once the server is confirmed, with the server's current
// annotations (confirmed, outcome) in the response metadata.
func testConfirmed(t *testing.T) {
	e := setup(t)
	e.readyGameServer(t, "gs-a", true, harness.TimeoutKey, "20s")
	ch := e.allocateAsync(t)
	e.waitState(t, "gs-a", "Allocating", 10*time.Second)
	expectPending(t, ch, time.Second)
	id := e.confirm(t, "gs-a")
	confirmedAt := time.Now()
	a := receive(t, ch, 15*time.Second)
	if a.status != 200 {
		t.Fatalf("want 200, got %s", a)
	}
	if a.body["gameServerName"] != "gs-a" {
		t.Errorf("gameServerName: %s", a)
	}
	if a.annotation(harness.ConfirmedKey) != id || a.annotation(harness.OutcomeKey) != "Confirmed" {
		t.Errorf("response metadata should show confirmed=%s outcome=Confirmed: %s", id, a)
	}
	if gs := e.cp.GetGameServer(t, e.ns, "gs-a"); harness.State(gs) != "Allocated" {
		t.Errorf("answered while the server is %s", harness.State(gs))
	}
	t.Logf("answered %v after the confirmation (request took %v)", a.at.Sub(confirmedAt), a.took)
}

// retried: gs-a (first by name) is lost in the way `lose` does it; the gateway allocates again,
// gets gs-b, and answers once gs-b is confirmed.
func retried(t *testing.T, timeoutA string, lose func(e *env)) {
	e := setup(t)
	e.readyGameServer(t, "gs-a", true, harness.TimeoutKey, timeoutA)
	e.readyGameServer(t, "gs-b", true, harness.TimeoutKey, "20s")
	before := e.alloc.Calls.Load()
	ch := e.allocateAsync(t)
	e.waitState(t, "gs-a", "Allocating", 10*time.Second)
	lose(e)
	e.waitState(t, "gs-b", "Allocating", 15*time.Second)
	expectPending(t, ch, 500*time.Millisecond)
	e.confirm(t, "gs-b")
	a := receive(t, ch, 15*time.Second)
	if a.status != 200 || a.body["gameServerName"] != "gs-b" {
		t.Fatalf("want 200 naming gs-b, got %s", a)
	}
	if calls := e.alloc.Calls.Load() - before; calls != 2 {
		t.Errorf("want 2 allocator calls, got %d", calls)
	}
}

func testTimedOutThenRetried(t *testing.T) {
	retried(t, "2s", func(e *env) { e.waitState(t, "gs-a", "Unhealthy", 10*time.Second) })
}

func testUnhealthyThenRetried(t *testing.T) {
	retried(t, "20s", func(e *env) {
		if _, err := e.sdk.SetState(harness.Ctx(t), "gs-a", "Unhealthy"); err != nil {
			t.Fatalf("SDK Unhealthy: %v", err)
		}
	})
}

func testDeletedThenRetried(t *testing.T) {
	retried(t, "20s", func(e *env) {
		c := e.cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(e.ns)
		if err := c.Delete(harness.Ctx(t), "gs-a", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete: %v", err)
		}
	})
}

// A server that is not opted in is not gated: answered with the allocator's answer at once.
func testNotGated(t *testing.T) {
	e := setup(t)
	e.readyGameServer(t, "plain", false)
	a := e.allocate(t)
	if a.status != 200 || a.body["gameServerName"] != "plain" {
		t.Fatalf("want 200 naming plain, got %s", a)
	}
	if a.took > 3*time.Second {
		t.Errorf("not gated but took %v", a.took)
	}
	if gs := e.cp.GetGameServer(t, e.ns, "plain"); harness.State(gs) != "Allocated" {
		t.Errorf("want Allocated, have %s", harness.Describe(gs))
	}
}

func testNoServer(t *testing.T) {
	e := setup(t)
	a := e.allocate(t)
	if a.status != 429 || a.body["code"] != float64(8) || !strings.Contains(a.raw, "there is no available GameServer") {
		t.Fatalf("want 429 code 8, got %s", a)
	}
}

func testMalformed(t *testing.T) {
	e := setup(t)
	for _, body := range []string{`{"namespace":`, `[1,2]`, `{"namespace":7}`, `{"metadata":{"labels":[]}}`} {
		a, err := e.post(t, e.client, body)
		if err != nil {
			t.Fatal(err)
		}
		if a.status != 400 || a.body["code"] != float64(3) {
			t.Errorf("%s: want 400 code 3, got %s", body, a)
		}
	}
}

func testOverSize(t *testing.T) {
	e := setup(t)
	big := fmt.Sprintf(`{"namespace":%q,"metadata":{"annotations":{"x":%q}}}`, e.ns, strings.Repeat("y", 70000))
	a, err := e.post(t, e.client, big)
	if err != nil {
		// The server may close the connection after answering 413 while the client still writes.
		t.Logf("POST over the limit: %v", err)
		return
	}
	if a.status != 413 {
		t.Fatalf("want 413, got %s", a)
	}
}

func testBadClientCert(t *testing.T) {
	e := setup(t)
	other := harness.NewTestCA(t, filepath.Join(e.cp.Dir, "other-ca"), "not-trusted")
	crt, key := other.Issue(t, "intruder", "intruder", false)
	for name, c := range map[string]*http.Client{
		"foreign certificate": harness.HTTPSClient(t, e.servingCA, crt, key),
		"no certificate":      harness.HTTPSClient(t, e.servingCA, "", ""),
	} {
		a, err := e.post(t, c, fmt.Sprintf(`{"namespace":%q}`, e.ns))
		if err == nil {
			t.Errorf("%s: want the TLS handshake refused, got %s", name, a)
		} else {
			t.Logf("%s: refused: %v", name, err)
		}
	}
	// The good certificate still works (the refusals did not break the listener).
	if a := e.allocate(t); a.status != 429 {
		t.Errorf("good client after refusals: want 429 (no server), got %s", a)
	}
}

// X-Allocating-Deadline bounds the whole wait: a server never confirmed (timeout 20s) is given
// up at the request's deadline with 429.
func testDeadlineHeader(t *testing.T) {
	e := setup(t)
	e.readyGameServer(t, "slow", true, harness.TimeoutKey, "20s")
	a := e.allocate(t, "X-Allocating-Deadline", "2s")
	if a.status != 429 || a.body["code"] != float64(8) {
		t.Fatalf("want 429 at the deadline, got %s", a)
	}
	if a.took < 1500*time.Millisecond || a.took > 6*time.Second {
		t.Errorf("answered after %v, want about 2s", a.took)
	}
	bad := e.allocate(t, "X-Allocating-Deadline", "soon")
	if bad.status != 400 {
		t.Errorf("malformed deadline header: want 400, got %s", bad)
	}
}

func testAllocatorDown(t *testing.T) {
	e := setup(t)
	e.alloc.Stop()
	a := e.allocate(t)
	if a.status != 503 || a.body["code"] != float64(14) {
		t.Fatalf("want 503 code 14, got %s", a)
	}
}
