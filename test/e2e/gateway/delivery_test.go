package gateway

// Issue 23, part 2 and 3: no server lost. Every server the gateway allocates is either delivered
// to a client that asked for it (`delivered` written before the 200) or released by the resolver
// (outcome Undelivered, on-undelivered) within its answer-by + the resolver's grace: after a
// client that left, a deadline, a SIGTERM, a SIGKILL of the gateway's replica. A retry carrying
// the request's idempotency key, to any replica, waits on the same server.

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agones-allocating-webhook/e2e/harness"
)

// released waits until the resolver has released `name` as undelivered and returns how long that
// took from `from`.
func (e *env) released(t *testing.T, name string, from time.Time, within time.Duration) time.Duration {
	t.Helper()
	var last string
	if !harness.Poll(within, 50*time.Millisecond, func() bool {
		gs := e.cp.GetGameServer(t, e.ns, name)
		last = harness.Describe(gs)
		return harness.State(gs) == "Shutdown" && harness.Annotation(gs, harness.OutcomeKey) == "Undelivered"
	}) {
		t.Fatalf("%s not released (Shutdown, outcome Undelivered) within %v: %s\nresolver:\n%s", name, within, last, e.wh.LogTail(20))
	}
	return time.Since(from)
}

// extraGateway starts a second gateway replica on the same allocator (the replica that is killed).
func (e *env) extraGateway(t *testing.T, name string, extra ...string) (*harness.Webhook, *http.Client) {
	t.Helper()
	gw := e.cp.StartGatewayNamed(t, name, e.alloc, e.clientCA.CAFile, extra...)
	crt, key := e.clientCA.Issue(t, name+"-client", "director", false)
	return gw, harness.HTTPSClient(t, gw.CAFile, crt, key)
}

func (e *env) postVia(t *testing.T, gw *harness.Webhook, c *http.Client, headers ...string) <-chan answer {
	ch := make(chan answer, 1)
	saved := *e
	saved.gw = gw
	go func() {
		a, err := saved.post(t, c, fmt.Sprintf(`{"namespace":%q}`, e.ns), headers...)
		if err != nil {
			a = answer{status: -1, raw: err.Error()}
		}
		ch <- a
	}()
	return ch
}

// A confirmed answer carries the delivery mark; the server stays Allocated past its answer-by.
func testDeliveredStaysAllocated(t *testing.T) {
	e := setup(t)
	e.readyGameServer(t, "gs-d", true, harness.TimeoutKey, "20s")
	ch := e.allocateAsync(t, "X-Allocating-Deadline", "3s")
	gs := e.waitState(t, "gs-d", "Allocating", 10*time.Second)
	if harness.Annotation(gs, harness.AnswerByKey) == "" {
		t.Fatalf("the allocation carries no answer-by: %s", harness.Describe(gs))
	}
	e.confirm(t, "gs-d")
	a := receive(t, ch, 10*time.Second)
	if a.status != 200 || a.body["gameServerName"] != "gs-d" {
		t.Fatalf("want 200 naming gs-d, got %s", a)
	}
	gs = e.cp.GetGameServer(t, e.ns, "gs-d")
	if harness.Annotation(gs, harness.DeliveredKey) == "" {
		t.Fatalf("answered without the delivery mark: %s", harness.Describe(gs))
	}
	time.Sleep(3*time.Second + 4*time.Second) // past answer-by + the resolver's 3 s grace
	gs = e.cp.GetGameServer(t, e.ns, "gs-d")
	if harness.State(gs) != "Allocated" || harness.Annotation(gs, harness.OutcomeKey) != "Confirmed" {
		t.Fatalf("a delivered server was touched after its answer-by: %s", harness.Describe(gs))
	}
}

// The client leaves while waiting: the server is released within a few seconds, not at its
// deadline (20 s) or its timeout (20 s).
func testClientGoneReleased(t *testing.T) {
	e := setup(t)
	e.readyGameServer(t, "gs-gone", true, harness.TimeoutKey, "20s")
	impatient := *e.client
	impatient.Timeout = 2 * time.Second
	if _, err := e.post(t, &impatient, fmt.Sprintf(`{"namespace":%q}`, e.ns)); err == nil {
		t.Fatal("answered before the client's timeout")
	}
	took := e.released(t, "gs-gone", time.Now(), 10*time.Second)
	t.Logf("released %v after the client gave up", took)
	if !strings.Contains(e.wh.Logs(), "AllocatingUndelivered") && !strings.Contains(e.wh.Logs(), "never delivered") {
		t.Errorf("the resolver logged no release:\n%s", e.wh.LogTail(20))
	}
}

// No confirmation within the request's deadline: 429, and the server is released (nobody will
// be told its address), long before its own 20 s timeout.
func testDeadlineReleased(t *testing.T) {
	e := setup(t)
	e.readyGameServer(t, "gs-late2", true, harness.TimeoutKey, "20s")
	start := time.Now()
	a := e.allocate(t, "X-Allocating-Deadline", "2s")
	if a.status != 429 {
		t.Fatalf("want 429, got %s", a)
	}
	took := e.released(t, "gs-late2", start, 2*time.Second+10*time.Second)
	t.Logf("released %v after the request (deadline 2s)", took)
}

// The replica holding the wait is SIGKILLed: nobody is left to answer or to release, yet the
// resolver releases the server within its deadline + 10 s (the answer-by the allocation carried).
func testKilledReplicaReleased(t *testing.T) {
	e := setup(t)
	e.readyGameServer(t, "gs-kill", true, harness.TimeoutKey, "30s")
	gw, c := e.extraGateway(t, "gw-killed")
	start := time.Now()
	ch := e.postVia(t, gw, c, "X-Allocating-Deadline", "4s")
	e.waitState(t, "gs-kill", "Allocating", 10*time.Second)
	gw.Kill()
	if a := receive(t, ch, 5*time.Second); a.status != -1 {
		t.Fatalf("want the connection lost, got %s", a)
	}
	took := e.released(t, "gs-kill", start, 4*time.Second+10*time.Second)
	t.Logf("released %v after the request (deadline 4s, replica SIGKILLed)", took)
}

// A matchmaker whose replica was killed retries with the same idempotency key to another
// replica: the retry waits on the server the first attempt allocated (no second allocation) and
// gets it once it is confirmed; a later retry with the key is answered with it at once.
func testIdempotentRetryAfterKill(t *testing.T) {
	e := setup(t)
	e.readyGameServer(t, "gs-key", true, harness.TimeoutKey, "30s")
	e.readyGameServer(t, "gs-other", true, harness.TimeoutKey, "30s")
	key := "match-" + e.ns
	gw, c := e.extraGateway(t, "gw-first")
	calls := e.alloc.Calls.Load()
	ch := e.postVia(t, gw, c, harness.IdempotencyHeader, key, "X-Allocating-Deadline", "10s")
	gs := e.waitState(t, "gs-key", "Allocating", 10*time.Second)
	if harness.Annotation(gs, harness.RequestKeyKey) != key {
		t.Fatalf("the allocation does not carry the key: %s", harness.Describe(gs))
	}
	gw.Kill()
	receive(t, ch, 5*time.Second)
	retry := e.allocateAsync(t, harness.IdempotencyHeader, key, "X-Allocating-Deadline", "15s")
	expectPending(t, retry, time.Second)
	e.confirm(t, "gs-key")
	a := receive(t, retry, 10*time.Second)
	if a.status != 200 || a.body["gameServerName"] != "gs-key" {
		t.Fatalf("the retry: want 200 naming gs-key, got %s\n%s", a, e.gw.LogTail(20))
	}
	if n := e.alloc.Calls.Load() - calls; n != 1 {
		t.Errorf("want 1 allocator call for the key, got %d", n)
	}
	if s := harness.State(e.cp.GetGameServer(t, e.ns, "gs-other")); s != "Ready" {
		t.Errorf("a second server was allocated for the key: gs-other is %s", s)
	}
	again := e.allocate(t, harness.IdempotencyHeader, key)
	if again.status != 200 || again.body["gameServerName"] != "gs-key" {
		t.Fatalf("a retry after delivery: want 200 naming gs-key at once, got %s", again)
	}
	if n := e.alloc.Calls.Load() - calls; n != 1 {
		t.Errorf("the retry after delivery called the allocator (%d calls)", n)
	}
	gsk := e.cp.GetGameServer(t, e.ns, "gs-key")
	if harness.State(gsk) != "Allocated" || harness.Annotation(gsk, harness.DeliveredKey) == "" {
		t.Errorf("gs-key after delivery: %s", harness.Describe(gsk))
	}
}

// A key that is not 1..128 of [A-Za-z0-9._~:-] is refused before anything is allocated.
func testBadIdempotencyKey(t *testing.T) {
	e := setup(t)
	calls := e.alloc.Calls.Load()
	a := e.allocate(t, harness.IdempotencyHeader, "has space")
	if a.status != 400 || !strings.Contains(a.raw, harness.IdempotencyHeader) {
		t.Fatalf("want 400 naming the header, got %s", a)
	}
	if e.alloc.Calls.Load() != calls {
		t.Errorf("the allocator was called for a refused request")
	}
	// The request may not set the gateway's own marks.
	r, err := e.post(t, e.client, fmt.Sprintf(`{"namespace":%q,"metadata":{"annotations":{%q:"x"}}}`, e.ns, harness.DeliveredKey))
	if err != nil || r.status != 400 {
		t.Fatalf("a request setting %s: want 400, got %v %v", harness.DeliveredKey, r, err)
	}
}

// SIGTERM with a short grace: what is still waiting when the grace ends is answered 503 and its
// server released at once (answer-by moved to now), not at the request's deadline.
func testShutdownReleasesLeftovers(t *testing.T) {
	e := setup(t)
	e.readyGameServer(t, "gs-term", true, harness.TimeoutKey, "30s")
	gw, c := e.extraGateway(t, "gw-term", "--shutdown-grace=1s")
	ch := e.postVia(t, gw, c, "X-Allocating-Deadline", "25s")
	e.waitState(t, "gs-term", "Allocating", 10*time.Second)
	start := time.Now()
	if err := gw.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	a := receive(t, ch, 10*time.Second)
	if a.status != 503 {
		t.Errorf("want 503 at the end of the grace, got %s", a)
	}
	took := e.released(t, "gs-term", start, 12*time.Second)
	t.Logf("released %v after SIGTERM (grace 1s, request deadline 25s)", took)
	if _, ok := gw.Wait(10 * time.Second); !ok {
		t.Errorf("the gateway did not exit")
	}
}
