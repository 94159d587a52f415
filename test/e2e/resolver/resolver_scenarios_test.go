package resolver

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agones-allocating-webhook/e2e/harness"
	"github.com/agones-allocating-webhook/e2e/standin"
)

// Scenario 1: allocation -> Allocating -> the game server confirms and its probe passes ->
// Allocated within about one probe period; outcome/confirmed annotations and a Normal Event.
func TestResolverPromotesWhenConfirmedAndProbed(t *testing.T) {
	e := setup(t)
	for _, probeType := range []string{"http", "tcp", "udp"} {
		t.Run(probeType, func(t *testing.T) {
			s := standIn(t)
			name := "promote-" + probeType
			port := map[string]string{"http": "http", "tcp": "tcp", "udp": "game"}[probeType]
			e.readyGameServer(t, name, s, harness.ProbePortKey, port, harness.ProbeTypeKey, probeType,
				harness.TimeoutKey, "20s")
			gs := e.allocate(t, name)
			allocation := harness.Annotation(gs, harness.AllocationKey)
			if allocation == "" || allocation != harness.Annotation(gs, harness.LastAllocatedKey) {
				t.Fatalf("allocation id should be last-allocated: %s", harness.Describe(gs))
			}
			e.stays(t, name, "Allocating", 2*period)
			if err := s.SetLoaded(true); err != nil {
				t.Fatal(err)
			}
			id := e.confirm(t, name)
			confirmedAt := time.Now()
			got, at := e.waitState(t, name, "Allocated", 10*time.Second)
			lag := at.Sub(confirmedAt)
			t.Logf("%s: Allocated %v after the confirmation", probeType, lag)
			if lag > period+time.Second {
				t.Errorf("promotion took %v, want within one period (+1s slack)", lag)
			}
			if harness.Annotation(got, harness.ConfirmedKey) != id || harness.Annotation(got, harness.OutcomeKey) != "Confirmed" {
				t.Errorf("want confirmed=%s outcome=Confirmed: %s", id, harness.Describe(got))
			}
			ev := e.waitEvent(t, name, "AllocatingConfirmed", 10*time.Second)
			if ev.Type != "Normal" || !strings.Contains(ev.Message, "in Allocating") {
				t.Errorf("event: %s %s", ev.Type, ev.Message)
			}
			t.Logf("event: %s", ev.Message)
		})
	}
	// After promotions over every probe type, the webhook's /metrics carries every series the
	// monitoring objects use: the dashboard and the alerts reference only exported names.
	metrics := filepath.Join(t.TempDir(), "metrics.txt")
	if err := os.WriteFile(metrics, []byte(e.wh.Metrics(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("python3", filepath.Join(root, "scripts", "check-dashboard"), "--metrics", metrics).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Errorf("scripts/check-dashboard --metrics: %v\n%s", err, out)
	}
}

// Scenario 2: a server that never becomes ready -> Unhealthy at its deadline (within one period),
// with a Warning Event naming the checks that failed.
func TestResolverTimesOutToUnhealthy(t *testing.T) {
	e := setup(t)
	s := standIn(t)
	e.readyGameServer(t, "never", s, harness.TimeoutKey, "3s", harness.ProbePortKey, "http")
	gs := e.allocate(t, "never")
	since := sinceOf(t, gs)
	got, at := e.waitState(t, "never", "Unhealthy", 15*time.Second)
	late := at.Sub(since.Add(3 * time.Second))
	if harness.Annotation(got, harness.OutcomeKey) != "TimedOut" || harness.HasAnnotation(got, harness.ConfirmedKey) {
		t.Errorf("want outcome TimedOut and no confirmed: %s", harness.Describe(got))
	}
	t.Logf("Unhealthy %v after the deadline", late)
	if late < -50*time.Millisecond {
		t.Errorf("timed out %v before the deadline", -late)
	}
	if late > period+time.Second {
		t.Errorf("timed out %v after the deadline, want within one period (+1s slack)", late)
	}
	ev := e.waitEvent(t, "never", "AllocatingTimedOut", 10*time.Second)
	if ev.Type != "Warning" {
		t.Errorf("want a Warning event, got %s", ev.Type)
	}
	for _, want := range []string{"agones.dev/sdk-allocating-ready not set", "http 503", "Unhealthy"} {
		if !strings.Contains(ev.Message, want) {
			t.Errorf("event message %q lacks %q", ev.Message, want)
		}
	}
	t.Logf("event: %s", ev.Message)
}

// Scenario 3: on-timeout Allocated (fail open) and Shutdown.
func TestResolverOnTimeoutActions(t *testing.T) {
	e := setup(t)
	e.readyGameServer(t, "fail-open", nil, harness.TimeoutKey, "2s", harness.OnTimeoutKey, "Allocated")
	e.readyGameServer(t, "shut", nil, harness.TimeoutKey, "2s", harness.OnTimeoutKey, "Shutdown")
	gs := e.allocate(t, "fail-open")
	e.allocate(t, "shut")
	got, _ := e.waitState(t, "fail-open", "Allocated", 10*time.Second)
	if harness.Annotation(got, harness.OutcomeKey) != "TimedOut" ||
		harness.Annotation(got, harness.ConfirmedKey) != harness.Annotation(gs, harness.AllocationKey) {
		t.Errorf("fail-open: want outcome TimedOut and confirmed = allocation: %s", harness.Describe(got))
	}
	if shut, _ := e.waitState(t, "shut", "Shutdown", 10*time.Second); harness.Annotation(shut, harness.OutcomeKey) != "TimedOut" {
		t.Errorf("shut: want outcome TimedOut: %s", harness.Describe(shut))
	}
	e.waitEvent(t, "fail-open", "AllocatingTimedOut", 10*time.Second)
	ev := e.waitEvent(t, "shut", "AllocatingTimedOut", 10*time.Second)
	if !strings.Contains(ev.Message, "Shutdown") {
		t.Errorf("event should name the action: %s", ev.Message)
	}
}

// Scenario 4: a readiness value left from the previous allocation is ignored.
func TestResolverIgnoresStaleReadiness(t *testing.T) {
	e := setup(t)
	e.readyGameServer(t, "reused", nil, harness.TimeoutKey, "20s")
	e.allocate(t, "reused")
	first := e.confirm(t, "reused")
	e.waitState(t, "reused", "Allocated", 10*time.Second)
	// The match ends; the game server goes back to Ready, keeping its annotation (the SDK cannot
	// delete annotations): SDK Ready() writes RequestReady, then Agones' controller writes Ready.
	if _, err := e.sdk.SetState(harness.Ctx(t), "reused", "RequestReady"); err != nil {
		t.Fatalf("SDK Ready(): %v", err)
	}
	cur := e.get(t, "reused")
	_ = unstructured.SetNestedField(cur.Object, "Ready", "status", "state")
	if _, err := e.cp.Dynamic(t, harness.AgonesController).Resource(harness.GameServerGVR).Namespace(e.ns).
		Update(harness.Ctx(t), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("controller RequestReady -> Ready: %v", err)
	}
	e.waitState(t, "reused", "Ready", 5*time.Second)
	time.Sleep(5 * time.Millisecond) // a distinct last-allocated timestamp
	gs := e.allocate(t, "reused")
	second := harness.Annotation(gs, harness.AllocationKey)
	if second == first || harness.Annotation(gs, harness.SdkReadyKey) != first {
		t.Fatalf("want a new allocation id and the stale readiness value: %s", harness.Describe(gs))
	}
	e.stays(t, "reused", "Allocating", 2*time.Second)
	if id := e.confirm(t, "reused"); id != second {
		t.Fatalf("confirmed %s, want %s", id, second)
	}
	got, _ := e.waitState(t, "reused", "Allocated", 10*time.Second)
	if harness.Annotation(got, harness.ConfirmedKey) != second {
		t.Errorf("confirmed should be the second allocation: %s", harness.Describe(got))
	}
}

// Scenario 5: readiness annotation set but the probe failing -> not promoted until it passes.
func TestResolverWaitsForTheProbe(t *testing.T) {
	e := setup(t)
	s := standIn(t)
	e.readyGameServer(t, "probe", s, harness.TimeoutKey, "30s", harness.ProbePortKey, "http",
		harness.ProbePathKey, "/healthz")
	e.allocate(t, "probe")
	e.confirm(t, "probe")
	e.stays(t, "probe", "Allocating", 8*period)
	if err := s.SetLoaded(true); err != nil {
		t.Fatal(err)
	}
	loaded := time.Now()
	_, at := e.waitState(t, "probe", "Allocated", 10*time.Second)
	if lag := at.Sub(loaded); lag > period+time.Second {
		t.Errorf("promoted %v after the probe passed, want within one period (+1s)", lag)
	}
}

// Scenario 6a: the resolver is killed while servers are Allocating and restarted: they resolve.
func TestResolverResumesAfterRestart(t *testing.T) {
	e := setup(t)
	e.readyGameServer(t, "r-ready", nil, harness.TimeoutKey, "30s")
	e.readyGameServer(t, "r-late", nil, harness.TimeoutKey, "3s")
	e.allocate(t, "r-ready")
	e.allocate(t, "r-late")
	if err := e.wh.Stop(syscall.SIGKILL); err != nil {
		t.Logf("kill: %v", err)
	}
	e.confirm(t, "r-ready")
	time.Sleep(4 * time.Second) // r-late's deadline passes while no resolver runs
	e.stays(t, "r-ready", "Allocating", 100*time.Millisecond)
	// A new process (new identity): it takes the lease once the dead one's expires.
	wh2 := e.cp.StartWebhook(t, harness.WebhookOptions{Name: "resolver-restarted", Args: e.cp.ResolverArgs()})
	e.cp.RegisterWebhooks(t, wh2, harness.RegisterOptions{})
	e.wh = wh2
	wh2.WaitLeader(t, 20*time.Second)
	e.waitState(t, "r-ready", "Allocated", 5*time.Second)
	e.waitState(t, "r-late", "Unhealthy", 5*time.Second)
}

// Scenario 6b: two replicas; killing the leader -> the other one resolves.
func TestResolverFailsOverToTheOtherReplica(t *testing.T) {
	e := setup(t)
	standby := e.cp.StartWebhook(t, harness.WebhookOptions{Name: "standby", Args: e.cp.ResolverArgs()})
	time.Sleep(time.Second)
	if standby.IsLeader() {
		t.Fatal("standby leads while the first replica is alive")
	}
	e.readyGameServer(t, "f-ready", nil, harness.TimeoutKey, "30s")
	e.readyGameServer(t, "f-late", nil, harness.TimeoutKey, "4s")
	e.allocate(t, "f-ready")
	e.allocate(t, "f-late")
	if err := e.wh.Stop(syscall.SIGKILL); err != nil {
		t.Logf("kill: %v", err)
	}
	e.cp.RegisterWebhooks(t, standby, harness.RegisterOptions{})
	e.wh = standby
	e.confirm(t, "f-ready")
	standby.WaitLeader(t, 20*time.Second)
	e.waitState(t, "f-ready", "Allocated", 5*time.Second)
	e.waitState(t, "f-late", "Unhealthy", 10*time.Second)
}

// Scenario 7: a matchmaker waiting with kubectl wait returns as soon as the server is playable
// (not when it is merely Allocating).
func TestMatchmakerKubectlWait(t *testing.T) {
	e := setup(t)
	s := standIn(t)
	e.readyGameServer(t, "mm", s, harness.TimeoutKey, "30s", harness.ProbePortKey, "tcp", harness.ProbeTypeKey, "tcp")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The game server: plays the SDK side, loads for 1.5s after entering Allocating.
	go s.Play(ctx, e.sdk.Dyn, e.ns, "mm", 1500*time.Millisecond, t.Logf)
	time.Sleep(300 * time.Millisecond) // the stand-in's watch is established

	gs := e.allocate(t, "mm")
	if harness.Annotation(gs, harness.SinceKey) == "" {
		t.Fatalf("the allocator's answer should show it is gated: %s", harness.Describe(gs))
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, e.cp.KubectlPath, "--kubeconfig", e.cp.Kubeconfig, "--context", harness.Admin,
		"-n", e.ns, "wait", "--for=jsonpath={.status.state}=Allocated", "gameserver/mm", "--timeout=30s")
	out, err := cmd.CombinedOutput()
	returned := time.Since(start)
	if err != nil {
		t.Fatalf("kubectl wait: %v\n%s", err, out)
	}
	got := e.get(t, "mm")
	if harness.State(got) != "Allocated" || harness.Annotation(got, harness.OutcomeKey) != "Confirmed" || !s.Loaded() {
		t.Fatalf("kubectl wait returned but: %s (loaded %v)", harness.Describe(got), s.Loaded())
	}
	t.Logf("kubectl wait returned after %v (stand-in loads for 1.5s): %s", returned, strings.TrimSpace(string(out)))
	if returned < 1500*time.Millisecond {
		t.Errorf("kubectl wait returned before the server was playable (%v)", returned)
	}
	if returned > 1500*time.Millisecond+period+2*time.Second {
		t.Errorf("kubectl wait returned %v, want soon after the server became playable", returned)
	}
}

var _ = standin.AllocationKey
