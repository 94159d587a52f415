package leader

import (
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agones-allocating-webhook/e2e/harness"
)

const leaseNS, leaseName = "allocating-system", "allocating-webhook"

// noKeepAlive scrapes /metrics without keeping connections open, so a replica's shutdown time
// measures the webhook, not an idle scrape connection.
var noKeepAlive = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// gauge returns the value of an unlabelled metric line ("" when absent or unreachable).
func gauge(w *harness.Webhook, name string) string {
	resp, err := noKeepAlive.Get(w.HealthURL("/metrics"))
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return ""
	}
	return harness.MetricValue(string(b), name)
}

func leading(w *harness.Webhook) bool {
	return w.Running() && gauge(w, "allocating_webhook_leader") == "1"
}

func startReplica(t *testing.T, cp *harness.ControlPlane, identity, context string) *harness.Webhook {
	return cp.StartWebhook(t, harness.WebhookOptions{
		Name: identity,
		Args: []string{"--kubeconfig=" + cp.Kubeconfig, "--context=" + context,
			"--leader-election-identity=" + identity},
	})
}

// waitFor polls cond every 50ms until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	return harness.Poll(timeout, 50*time.Millisecond, cond)
}

type leaseView struct {
	holder      string
	transitions int32
	duration    int32
}

func lease(t *testing.T, cp *harness.ControlPlane) leaseView {
	l, err := cp.Clientset(t, harness.Admin).CoordinationV1().Leases(leaseNS).Get(harness.Ctx(t), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get lease: %v", err)
	}
	v := leaseView{}
	if l.Spec.HolderIdentity != nil {
		v.holder = *l.Spec.HolderIdentity
	}
	if l.Spec.LeaseTransitions != nil {
		v.transitions = *l.Spec.LeaseTransitions
	}
	if l.Spec.LeaseDurationSeconds != nil {
		v.duration = *l.Spec.LeaseDurationSeconds
	}
	if l.Spec.AcquireTime == nil || l.Spec.RenewTime == nil {
		t.Errorf("lease without acquireTime/renewTime: %+v", l.Spec)
	}
	return v
}

// exactlyOne waits until exactly one replica reports leading and the Lease names it; returns it.
func exactlyOne(t *testing.T, cp *harness.ControlPlane, ws map[string]*harness.Webhook, timeout time.Duration) string {
	t.Helper()
	var who string
	ok := waitFor(timeout, func() bool {
		n := 0
		for id, w := range ws {
			if leading(w) {
				n++
				who = id
			}
		}
		return n == 1 && lease(t, cp).holder == who
	})
	if !ok {
		t.Fatalf("not exactly one leader within %v (lease holder %q)", timeout, lease(t, cp).holder)
	}
	// And it stays that way for a few renewals.
	for i := 0; i < 6; i++ {
		time.Sleep(500 * time.Millisecond)
		n := 0
		for _, w := range ws {
			if leading(w) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d replicas report leading", n)
		}
	}
	return who
}

func TestLeaderElection(t *testing.T) {
	cp := harness.Setup(t)
	ws := map[string]*harness.Webhook{
		"replica-a": startReplica(t, cp, "replica-a", harness.Resolver),
		"replica-b": startReplica(t, cp, "replica-b", harness.Resolver2),
	}
	first := exactlyOne(t, cp, ws, 30*time.Second)
	before := lease(t, cp)
	if before.duration != 15 {
		t.Errorf("leaseDurationSeconds %d, want 15", before.duration)
	}
	t.Logf("leader: %s (transitions %d)", first, before.transitions)

	// Crash the leader: the other takes over within lease duration (15s) + retry (2s, jittered up
	// to 2.2x) of its last observation.
	killed := time.Now()
	ws[first].Kill()
	delete(ws, first)
	var second string
	for id := range ws {
		second = id
	}
	if !waitFor(25*time.Second, func() bool { return leading(ws[second]) }) {
		t.Fatalf("%s did not take over within 25s of the leader's SIGKILL", second)
	}
	crashTakeover := time.Since(killed)
	after := lease(t, cp)
	if after.holder != second || after.transitions != before.transitions+1 {
		t.Errorf("after takeover: lease %+v, want holder %s and transitions %d", after, second, before.transitions+1)
	}
	t.Logf("takeover after SIGKILL: %v", crashTakeover.Round(10*time.Millisecond))
	// The follower trusts the lease for 15s after it last saw a renewal (at most the kill time),
	// then polls every retry period x [1, 2.2): 15s + 4.4s, plus request latency.
	if crashTakeover > 21*time.Second {
		t.Errorf("takeover after SIGKILL took %v, want <= lease duration + jittered retry", crashTakeover)
	}

	// A third replica joins as a follower; then the leader stops gracefully: it releases the Lease
	// (holder cleared, duration 1s) and the follower leads within about one retry period.
	ws["replica-c"] = startReplica(t, cp, "replica-c", harness.Resolver)
	exactlyOne(t, cp, ws, 10*time.Second)
	stopped := time.Now()
	if err := ws[second].Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan time.Duration, 1)
	go func() {
		if err, ok := ws[second].Wait(10 * time.Second); !ok || err != nil {
			t.Errorf("graceful stop of %s: exited=%v err=%v", second, ok, err)
		}
		exited <- time.Since(stopped)
	}()
	if !waitFor(10*time.Second, func() bool { return leading(ws["replica-c"]) }) {
		t.Fatalf("replica-c did not take over within 10s of the leader's SIGTERM")
	}
	gracefulTakeover := time.Since(stopped)
	stopTook := <-exited
	if !strings.Contains(ws[second].Logs(), "released the lease") {
		t.Errorf("%s did not log releasing the lease", second)
	}
	t.Logf("leader stop took %v; takeover after SIGTERM: %v", stopTook.Round(10*time.Millisecond), gracefulTakeover.Round(10*time.Millisecond))
	if stopTook > 3*time.Second {
		t.Errorf("graceful stop took %v", stopTook)
	}
	// Released: the follower takes it at its next attempt (retry period x [1, 2.2)).
	if gracefulTakeover > 2*time.Second*22/10+time.Second {
		t.Errorf("takeover after a graceful stop took %v, want within one jittered retry period", gracefulTakeover)
	}
	if gracefulTakeover >= crashTakeover {
		t.Errorf("graceful handover (%v) not faster than crash takeover (%v)", gracefulTakeover, crashTakeover)
	}
	if l := lease(t, cp); l.holder != "replica-c" {
		t.Errorf("lease holder %q, want replica-c", l.holder)
	}
	for _, w := range []*harness.Webhook{ws["replica-c"]} {
		if !strings.Contains(w.Logs(), "started leading") {
			t.Errorf("%s: no 'started leading' log line", w.Name)
		}
	}
}
