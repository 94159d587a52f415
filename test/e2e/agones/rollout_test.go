package agones

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agones-allocating-webhook/e2e/harness"
)

// Issue 24: a scale-down or rolling update proceeds at the pace it has with stock Agones and
// Allocated servers, while a server is held Allocating, and no confirmed server is shut down under
// its match. The Fleet, GameServerSet and GameServer controllers are harness.FleetSim, which keeps
// Agones' pending-deletion overlay and gates the rollout on shutdownReplicas as Agones 1.56 does:
// with the scale-down held (the behaviour before issue 24, still on-scale-down: Hold) the rolling
// update waits for the held server to resolve.

const fleetSize = 3

func fleetTemplate(version string, annotations ...string) (map[string]string, map[string]string) {
	a := map[string]string{harness.TimeoutKey: "30s", "example.com/version": version}
	for i := 0; i+1 < len(annotations); i += 2 {
		a[annotations[i]] = annotations[i+1]
	}
	return map[string]string{harness.EnabledLabel: "true"}, a
}

// startFleet starts a Fleet of fleetSize and waits until it is Ready.
func (e env) startFleet(t *testing.T, name string, annotations ...string) *harness.FleetSim {
	t.Helper()
	l, a := fleetTemplate("1", annotations...)
	f := e.cp.StartFleet(t, e.ns, name, fleetSize, l, a)
	if took, ok, summary := f.WaitSettled(time.Now(), 30*time.Second); !ok {
		t.Fatalf("fleet %s never became Ready (%v): %s; errors %q", name, took, summary, f.Errors())
	}
	return f
}

// fleetServers lists the Fleet's servers in a state, sorted by name.
func (e env) fleetServers(t *testing.T, fleet, state string) []string {
	t.Helper()
	list, err := e.cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(e.ns).
		List(harness.Ctx(t), metav1.ListOptions{LabelSelector: harness.FleetLabel + "=" + fleet})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	var out []string
	for i := range list.Items {
		if harness.State(&list.Items[i]) == state {
			out = append(out, list.Items[i].GetName())
		}
	}
	sort.Strings(out)
	return out
}

// playing allocates one of the Fleet's Ready servers and has the game server confirm it: it ends
// Allocated (players on it).
func (e env) playing(t *testing.T, fleet string) string {
	t.Helper()
	name := e.fleetServers(t, fleet, "Ready")[0]
	e.allocate(t, name, harness.Allocation{})
	e.confirm(t, name)
	e.waitState(t, name, "Allocated", 5*time.Second)
	return name
}

// held allocates one of the Fleet's Ready servers and leaves it Allocating (its game server is
// still loading the match).
func (e env) held(t *testing.T, fleet string) string {
	t.Helper()
	name := e.fleetServers(t, fleet, "Ready")[0]
	got, _ := e.allocate(t, name, harness.Allocation{})
	mustState(t, "allocated server", got, "Allocating")
	return name
}

// change runs one change of the Fleet (a template change or a scale) and returns how long it took
// to settle.
func change(t *testing.T, f *harness.FleetSim, what string, timeout time.Duration, do func()) (time.Duration, bool) {
	t.Helper()
	start := time.Now()
	do()
	took, ok, summary := f.WaitSettled(start, timeout)
	t.Logf("%s: settled=%v after %v: %s", what, ok, took.Round(time.Millisecond), summary)
	return took, ok
}

// stillPlaying: the confirmed server is still Allocated and was never shut down.
func (e env) stillPlaying(t *testing.T, f *harness.FleetSim, name string) {
	t.Helper()
	if gs := e.get(t, name); harness.State(gs) != "Allocated" || harness.Annotation(gs, harness.ConfirmedKey) == "" {
		t.Errorf("the confirmed server %s is no longer playing: %s", name, harness.Describe(gs))
	}
	for _, s := range f.Shutdowns() {
		if s.Name == name {
			t.Errorf("the confirmed server %s was shut down under its match: %+v", name, s)
		}
	}
}

// scaledDown: the held server was shut down by the controller's own UPDATE (outcome ScaledDown),
// is gone, and the resolver recorded an Event for it.
func (e env) scaledDown(t *testing.T, f *harness.FleetSim, name string) {
	t.Helper()
	rec := f.ShutdownOf(name)
	if rec == nil {
		t.Fatalf("the held server %s was never shut down by the GameServerSet controller; shutdowns %+v", name, f.Shutdowns())
	}
	if rec.WasState != "Allocating" || rec.GotState != "Shutdown" || rec.GotOutcome != "ScaledDown" {
		t.Errorf("held server %s: the controller's Shutdown answered %+v, want Allocating -> Shutdown, outcome ScaledDown", name, *rec)
	}
	ok := harness.Poll(10*time.Second, 100*time.Millisecond, func() bool {
		evs, err := e.cp.Dynamic(t, harness.Admin).Resource(harness.EventGVR).Namespace(e.ns).List(harness.Ctx(t),
			metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false
		}
		for _, ev := range evs.Items {
			if r, _ := ev.Object["reason"].(string); r == "AllocatingScaledDown" {
				msg, _ := ev.Object["message"].(string)
				t.Logf("Event %s: %s", r, msg)
				return true
			}
		}
		return false
	})
	if !ok {
		t.Errorf("no AllocatingScaledDown Event for %s; webhook log tail:\n%s", name, e.wh.LogTail(30))
	}
}

// withinStockPace: the change with a held server took no longer than the same change without
// one (same run), allowing for two controller passes and the resolver's write.
func withinStockPace(t *testing.T, what string, held, stock time.Duration) {
	t.Helper()
	limit := 2*stock + 2*time.Second
	fmt.Printf("rollout figures: %s: stock %v, with a held server %v (limit %v)\n", what,
		stock.Round(time.Millisecond), held.Round(time.Millisecond), limit.Round(time.Millisecond))
	if held > limit {
		t.Errorf("%s took %v with a held server, %v without (limit %v): the held server stalled it", what, held, stock, limit)
	}
}

func TestIssue24_RolloutsDoNotStallBehindAHeldServer(t *testing.T) {
	e := setup(t)

	t.Run("rolling-update", func(t *testing.T) {
		// Stock pace: the same Fleet with one server Allocated (players on it) and none held.
		stockFleet := e.startFleet(t, "stock")
		stockPlaying := e.playing(t, "stock")
		l, a := fleetTemplate("2")
		stock, ok := change(t, stockFleet, "stock rolling update", 60*time.Second, func() { stockFleet.SetTemplate(l, a) })
		if !ok {
			t.Fatalf("the stock rolling update did not settle in 60s: errors %q", stockFleet.Errors())
		}
		e.stillPlaying(t, stockFleet, stockPlaying)

		f := e.startFleet(t, "rollout")
		playing := e.playing(t, "rollout")
		held := e.held(t, "rollout")
		took, ok := change(t, f, "rolling update with a held server", 25*time.Second, func() { f.SetTemplate(l, a) })
		if !ok {
			t.Fatalf("the rolling update did not settle within 25s (the held server's timeout is 30s): errors %q", f.Errors())
		}
		withinStockPace(t, "rolling update", took, stock)
		e.stillPlaying(t, f, playing)
		e.scaledDown(t, f, held)
		if errs := f.Errors(); len(errs) > 0 {
			t.Errorf("controller errors (each an error log and a retry in Agones): %q", errs)
		}
	})

	t.Run("scale-to-zero", func(t *testing.T) {
		stockFleet := e.startFleet(t, "stock0")
		stockPlaying := e.playing(t, "stock0")
		stock, ok := change(t, stockFleet, "stock scale to 0", 30*time.Second, func() { stockFleet.Scale(0) })
		if !ok {
			t.Fatalf("the stock scale-down did not settle: errors %q", stockFleet.Errors())
		}
		e.stillPlaying(t, stockFleet, stockPlaying)

		f := e.startFleet(t, "scale0")
		playing := e.playing(t, "scale0")
		held := e.held(t, "scale0")
		took, ok := change(t, f, "scale to 0 with a held server", 25*time.Second, func() { f.Scale(0) })
		if !ok {
			t.Fatalf("the scale-down did not settle within 25s: errors %q", f.Errors())
		}
		withinStockPace(t, "scale to 0", took, stock)
		e.stillPlaying(t, f, playing)
		e.scaledDown(t, f, held)
		if st := f.Status(); st.AllocatedReplicas != 1 || st.ShutdownReplicas != 0 {
			t.Errorf("Fleet status after the scale-down: %+v, want the playing server in allocatedReplicas and nothing pending", st)
		}
	})

	// on-scale-down: Hold is the Fleet's explicit choice of the behaviour before issue 24: the
	// held server stays Allocating and the rolling update waits for it (the documented cost). It
	// also shows that the stand-in reproduces the stall.
	t.Run("hold-stalls-until-resolved", func(t *testing.T) {
		const timeout = 4 * time.Second
		f := e.startFleet(t, "hold", harness.OnScaleDownKey, "Hold", harness.TimeoutKey, timeout.String())
		held := e.held(t, "hold")
		since := sinceOf(t, e.get(t, held))
		l, a := fleetTemplate("2", harness.OnScaleDownKey, "Hold", harness.TimeoutKey, timeout.String())
		took, ok := change(t, f, "rolling update with on-scale-down Hold", 30*time.Second, func() { f.SetTemplate(l, a) })
		if !ok {
			t.Fatalf("did not settle: errors %q", f.Errors())
		}
		settled := time.Now()
		rec := f.ShutdownOf(held)
		if rec == nil || rec.GotState != "Allocating" {
			t.Errorf("on-scale-down Hold: the controller's Shutdown of %s was not held: %+v", held, rec)
		}
		t.Logf("hold: settled %v after the template change, %v after the held server's since",
			took.Round(time.Millisecond), time.Since(since).Round(time.Millisecond))
		if settled.Sub(since) < timeout {
			t.Errorf("the rollout settled %v after since, before the %v deadline: the stand-in does not stall", settled.Sub(since), timeout)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		_, body, err := e.wh.Get("/metrics")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []string{"allocating_webhook_scaled_down_total", "allocating_webhook_resolver_scaled_down_total"} {
			if v := sumMetric(body, m, ""); v < 2 {
				t.Errorf("%s = %v, want >= 2 (one per held server scaled down)", m, v)
			}
		}
		if !strings.Contains(body, `allocating_webhook_allocating_duration_seconds_count{outcome="ScaledDown"}`) {
			t.Errorf("no ScaledDown outcome in allocating_webhook_allocating_duration_seconds")
		}
	})
}
