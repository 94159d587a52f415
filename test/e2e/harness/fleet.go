package harness

// FleetSim is a stand-in for the three Agones v1.56 controllers that act on a Fleet's GameServers
// during a scale-down or a rolling update, written from their source (the functions named below)
// so that a held server stalls the rollout here exactly as it does in Agones:
//
//   - Fleet controller (pkg/fleets/controller.go: syncFleet, applyDeploymentStrategy,
//     rollingUpdateActive, deleteEmptyGameServerSets, updateFleetStatus; and
//     controller_rollingupdatefix.go, feature RollingUpdateFix, on by default in 1.56): the active
//     GameServerSet grows by maxSurge while the total stays within spec + maxSurge; an old
//     GameServerSet is scaled down only when its spec equals its status.replicas and its
//     status.shutdownReplicas is 0; an empty old GameServerSet (replicas 0, shutdownReplicas 0) is
//     deleted.
//   - GameServerSet controller (pkg/gameserversets/controller.go: computeReconciliationAction,
//     deleteGameServers, computeStatus; gameserver_state_cache.go): Allocated and Reserved servers
//     are never deleted; every other state, Allocating included, is "up" and a deletion candidate
//     (servers before Ready first, then by name: the Packed sort on one node). A deletion is one
//     full UPDATE to Shutdown as agones-controller whose answer is ignored; on success the server
//     goes into the pending-deletion overlay, where it counts only in shutdownReplicas until the
//     listed object has a deletionTimestamp or is gone. A failed UPDATE aborts that set's pass.
//   - GameServer controller (pkg/gameservers/controller.go): a Shutdown server is deleted; a new
//     server becomes Ready after StartDelay (its pod starting, the SDK's Ready()).
//
// The GameServerSets live in memory (their objects add nothing the webhook sees); the
// GameServers are real objects written through kube-apiserver and the webhook. Fleet is the
// test's handle: Scale, SetTemplate, Status, and WaitSettled, which measures how long a change
// takes to settle.

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// Agones' labels on a Fleet's GameServers.
const (
	FleetLabel         = "agones.dev/fleet"
	GameServerSetLabel = "agones.dev/gameserverset"
)

// SetStatus is a GameServerSet's status counters as Agones computes them.
type SetStatus struct {
	Replicas, ReadyReplicas, AllocatedReplicas, ReservedReplicas, ShutdownReplicas int32
}

// ShutdownRecord is one Shutdown UPDATE the GameServerSet stand-in made.
type ShutdownRecord struct {
	Name       string
	Set        string
	WasState   string // the state of the copy the controller shut down
	GotState   string // the state the API server answered with (Agones ignores it)
	GotOutcome string
	At         time.Time
}

type simSet struct {
	name    string
	version int // the Fleet template version it was made from
	spec    int32
	status  SetStatus
	pending map[string]bool // the pending-deletion overlay
	serial  int
}

// FleetSim runs the stand-in controllers for one Fleet until Stop.
type FleetSim struct {
	ns, name string
	ctrl     dynamic.Interface // agones-controller
	admin    dynamic.Interface
	// StartDelay is how long a new GameServer takes to become Ready.
	StartDelay time.Duration

	mu         sync.Mutex
	replicas   int32
	maxSurge   string // "25%" or a number, as intstr
	maxUnavail string
	version    int
	labels     map[string]string
	annots     map[string]string
	sets       []*simSet
	templateOf map[string]template // set name -> the template it was made from
	status     SetStatus           // the Fleet's (sum of its sets)
	shutdowns  []ShutdownRecord
	errors     []string
	setSerial  int
	stop       chan struct{}
	done       chan struct{}
}

// StartFleet creates the stand-in for Fleet `name` in ns with `replicas` servers whose template
// carries labels/annotations, and runs its controllers every 50 ms until t ends.
func (cp *ControlPlane) StartFleet(t testing.TB, ns, name string, replicas int32, labels, annotations map[string]string) *FleetSim {
	t.Helper()
	f := &FleetSim{
		ns: ns, name: name,
		ctrl:       cp.Dynamic(t, AgonesController),
		admin:      cp.Dynamic(t, Admin),
		StartDelay: 300 * time.Millisecond,
		replicas:   replicas, maxSurge: "25%", maxUnavail: "25%",
		version: 1, labels: labels, annots: annotations, templateOf: map[string]template{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go f.run()
	t.Cleanup(f.Stop)
	return f
}

// Stop ends the controllers (idempotent).
func (f *FleetSim) Stop() {
	f.mu.Lock()
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	f.mu.Unlock()
	<-f.done
}

// Scale sets the Fleet's spec.replicas.
func (f *FleetSim) Scale(n int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replicas = n
}

// SetTemplate changes the Fleet's template (a rolling update).
func (f *FleetSim) SetTemplate(labels, annotations map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.labels, f.annots = labels, annotations
	f.version++
}

// Status is the Fleet's status counters.
func (f *FleetSim) Status() SetStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

// Shutdowns lists the Shutdown UPDATEs made so far.
func (f *FleetSim) Shutdowns() []ShutdownRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ShutdownRecord(nil), f.shutdowns...)
}

// ShutdownOf returns the last Shutdown UPDATE made of the named GameServer, or nil.
func (f *FleetSim) ShutdownOf(name string) *ShutdownRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.shutdowns) - 1; i >= 0; i-- {
		if f.shutdowns[i].Name == name {
			rec := f.shutdowns[i]
			return &rec
		}
	}
	return nil
}

// Errors lists the controller errors so far (each would be an error log and a retry in Agones).
func (f *FleetSim) Errors() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.errors...)
}

// Settled reports whether the Fleet is where its spec says, as Agones reaches it: only the
// active GameServerSet (the current template) has servers other than Allocated/Reserved ones,
// those are all Ready, the Fleet has max(spec, Allocated + Reserved) servers, and nothing is
// pending deletion.
// It also returns a one-line summary.
func (f *FleetSim) Settled() (bool, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var active *simSet
	for _, s := range f.sets {
		if s.version == f.version {
			active = s
		}
	}
	var blockedOld, blockedAll, shutdown, oldOthers int32
	summary := fmt.Sprintf("fleet spec %d status %+v;", f.replicas, f.status)
	for _, s := range f.sets {
		summary += fmt.Sprintf(" set %s(v%d spec %d %+v pending %d)", s.name, s.version, s.spec, s.status, len(s.pending))
		shutdown += s.status.ShutdownReplicas
		blocked := s.status.AllocatedReplicas + s.status.ReservedReplicas
		blockedAll += blocked
		if s != active {
			blockedOld += blocked
			oldOthers += s.status.Replicas - blocked
		}
	}
	if active == nil {
		return f.replicas == 0 && shutdown == 0 && oldOthers == 0, summary
	}
	// Allocated and Reserved servers stay where they are; every other server is a Ready one of
	// the current template, and there are as many servers as the spec asks (or as are Allocated
	// or Reserved, when that is more).
	want := max32(f.replicas, blockedAll)
	activeOthers := active.status.Replicas - active.status.AllocatedReplicas - active.status.ReservedReplicas
	ok := shutdown == 0 && oldOthers == 0 && active.status.ReadyReplicas == activeOthers &&
		active.status.Replicas+blockedOld == want
	return ok, summary
}

// WaitSettled polls Settled every 20 ms for up to timeout and returns how long it took from
// `from`; ok is false on a timeout (the last summary says where it stood).
func (f *FleetSim) WaitSettled(from time.Time, timeout time.Duration) (time.Duration, bool, string) {
	var summary string
	ok := Poll(timeout, 20*time.Millisecond, func() bool {
		var done bool
		done, summary = f.Settled()
		return done
	})
	return time.Since(from), ok, summary
}

func (f *FleetSim) run() {
	defer close(f.done)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-tick.C:
		}
		f.pass()
	}
}

func (f *FleetSim) fail(format string, args ...interface{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errors) < 100 {
		f.errors = append(f.errors, fmt.Sprintf(time.Now().Format("15:04:05.000 ")+format, args...))
	}
}

// pass is one round of the three controllers.
func (f *FleetSim) pass() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := f.admin.Resource(GameServerGVR).Namespace(f.ns).List(ctx, metav1.ListOptions{LabelSelector: FleetLabel + "=" + f.name})
	if err != nil {
		f.fail("list: %v", err)
		return
	}
	// GameServer controller.
	var live []unstructured.Unstructured
	for i := range list.Items {
		gs := &list.Items[i]
		if gs.GetDeletionTimestamp() != nil {
			live = append(live, *gs)
			continue
		}
		switch State(gs) {
		case "Shutdown":
			err := f.ctrl.Resource(GameServerGVR).Namespace(f.ns).Delete(ctx, gs.GetName(), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				f.fail("delete %s: %v", gs.GetName(), err)
				live = append(live, *gs)
			}
			continue
		case "Scheduled":
			if time.Since(gs.GetCreationTimestamp().Time) >= f.StartDelay {
				cp := gs.DeepCopy()
				_ = unstructured.SetNestedField(cp.Object, "Ready", "status", "state")
				_ = unstructured.SetNestedField(cp.Object, "127.0.0.1", "status", "address")
				_ = unstructured.SetNestedSlice(cp.Object, []interface{}{
					map[string]interface{}{"name": "default", "port": int64(7654)}}, "status", "ports")
				if got, err := f.ctrl.Resource(GameServerGVR).Namespace(f.ns).Update(ctx, cp, metav1.UpdateOptions{}); err == nil {
					gs = got
				} else if !apierrors.IsConflict(err) {
					f.fail("ready %s: %v", gs.GetName(), err)
				}
			}
		}
		live = append(live, *gs)
	}

	f.mu.Lock()
	version, replicas := f.version, f.replicas
	labels, annots := f.labels, f.annots
	f.mu.Unlock()

	// GameServerSet controller, one pass per set.
	bySet := map[string][]*unstructured.Unstructured{}
	for i := range live {
		bySet[live[i].GetLabels()[GameServerSetLabel]] = append(bySet[live[i].GetLabels()[GameServerSetLabel]], &live[i])
	}
	f.mu.Lock()
	sets := append([]*simSet(nil), f.sets...)
	f.mu.Unlock()
	for _, s := range sets {
		f.syncSet(ctx, s, bySet[s.name])
	}

	// Fleet controller.
	f.mu.Lock()
	defer f.mu.Unlock()
	var active *simSet
	var rest []*simSet
	for _, s := range f.sets {
		if s.version == version {
			active = s
		} else {
			rest = append(rest, s)
		}
	}
	if active == nil {
		f.setSerial++
		active = &simSet{name: fmt.Sprintf("%s-v%d-%d", f.name, version, f.setSerial), version: version,
			pending: map[string]bool{}}
		f.sets = append(f.sets, active)
		// Its template is the one current now (Agones copies the Fleet's template).
		f.templateOf[active.name] = template{labels, annots}
	}
	active.spec = f.applyDeploymentStrategy(replicas, active, rest)
	// deleteEmptyGameServerSets
	kept := f.sets[:0]
	for _, s := range f.sets {
		if s != active && s.status.Replicas == 0 && s.status.ShutdownReplicas == 0 {
			delete(f.templateOf, s.name)
			continue
		}
		kept = append(kept, s)
	}
	f.sets = kept
	var st SetStatus
	for _, s := range f.sets {
		st.Replicas += s.status.Replicas
		st.ReadyReplicas += s.status.ReadyReplicas
		st.AllocatedReplicas += s.status.AllocatedReplicas
		st.ReservedReplicas += s.status.ReservedReplicas
		st.ShutdownReplicas += s.status.ShutdownReplicas
	}
	f.status = st
}

type template struct {
	labels, annotations map[string]string
}

// intOrPercent is intstr.GetValueFromIntOrPercent for "N%" or "N".
func intOrPercent(v string, total int32, roundUp bool) int32 {
	var n float64
	if _, err := fmt.Sscanf(v, "%f%%", &n); err == nil && len(v) > 0 && v[len(v)-1] == '%' {
		x := n * float64(total) / 100
		if roundUp {
			return int32(math.Ceil(x))
		}
		return int32(math.Floor(x))
	}
	var i int32
	_, _ = fmt.Sscanf(v, "%d", &i)
	return i
}

func sum(sets []*simSet, f func(*simSet) int32) int32 {
	var n int32
	for _, s := range sets {
		n += f(s)
	}
	return n
}

// applyDeploymentStrategy: Agones' rolling update (the default strategy). Called with f.mu held.
func (f *FleetSim) applyDeploymentStrategy(replicas int32, active *simSet, rest []*simSet) int32 {
	if len(rest) == 0 {
		return replicas
	}
	if sum(rest, func(s *simSet) int32 { return s.spec }) == 0 {
		blocked := sum(rest, func(s *simSet) int32 { return s.status.ReservedReplicas + s.status.AllocatedReplicas })
		return max32(replicas-blocked, 0)
	}
	r := f.rollingUpdateActive(replicas, active, rest)
	f.rollingUpdateRest(replicas, active, rest)
	return r
}

func max32(a, b int32) int32 {
	if a > b {
		return a
	}
	return b
}

func min32(a, b int32) int32 {
	if a < b {
		return a
	}
	return b
}

// rollingUpdateActive (pkg/fleets/controller.go).
func (f *FleetSim) rollingUpdateActive(replicas int32, active *simSet, rest []*simSet) int32 {
	r := active.spec
	sumAllocated := sum(rest, func(s *simSet) int32 { return s.status.AllocatedReplicas })
	if active.spec != active.status.Replicas {
		return r
	}
	if replicas == 0 {
		return 0
	}
	if active.spec >= replicas-sumAllocated {
		return replicas - sumAllocated
	}
	surge := intOrPercent(f.maxSurge, replicas, true)
	maxSurge := surge + replicas
	r = min32(r+surge, replicas)
	total := sum(rest, func(s *simSet) int32 { return s.status.Replicas }) + r
	if total > maxSurge {
		r = max32(r-(total-maxSurge), 0)
	}
	if r+sumAllocated > replicas {
		r = max32(replicas-sumAllocated, 0)
	}
	return r
}

// rollingUpdateRest: rollingUpdateRestFixedOnReadyRollingUpdateFix (RollingUpdateFix, on by
// default), without the unhealthy clean-up (no Unhealthy servers here).
func (f *FleetSim) rollingUpdateRest(replicas int32, active *simSet, rest []*simSet) {
	r := intOrPercent(f.maxUnavail, f.status.ReadyReplicas, false)
	if r == 0 {
		r = 1
	}
	if r > replicas {
		r = replicas
	}
	all := append(append([]*simSet(nil), rest...), active)
	readyCount := sum(all, func(s *simSet) int32 { return s.status.ReadyReplicas })
	minAvailable := min32(f.status.ReadyReplicas-r, replicas)
	newUnavailable := active.spec - active.status.ReadyReplicas - active.status.ReservedReplicas -
		active.status.AllocatedReplicas - active.status.ShutdownReplicas
	if readyCount-minAvailable-newUnavailable <= 0 {
		return
	}
	total := readyCount - minAvailable
	if readyCount <= minAvailable {
		return
	}
	var done int32
	for _, s := range rest {
		if done >= total {
			break
		}
		if s.spec <= 0 {
			continue
		}
		if s.spec != s.status.Replicas {
			break
		}
		if s.status.ShutdownReplicas != 0 {
			continue // the stall: a server pending deletion blocks this set
		}
		n := min32(s.spec, total-done)
		switch {
		case s.status.Replicas == s.status.AllocatedReplicas:
			s.spec = 0
		case s.spec-n == s.spec:
			continue
		default:
			s.spec -= n
		}
		done += n
	}
}

// syncSet is one GameServerSet controller pass for s over its listed servers.
func (f *FleetSim) syncSet(ctx context.Context, s *simSet, list []*unstructured.Unstructured) {
	f.mu.Lock()
	tmpl := f.templateOf[s.name]
	spec := s.spec
	// The overlay: an entry stays until the listed object has a deletionTimestamp or is gone.
	listed := map[string]*unstructured.Unstructured{}
	for _, gs := range list {
		listed[gs.GetName()] = gs
	}
	for name := range s.pending {
		if gs, ok := listed[name]; !ok || gs.GetDeletionTimestamp() != nil {
			delete(s.pending, name)
		}
	}
	pending := map[string]bool{}
	for k := range s.pending {
		pending[k] = true
	}
	f.mu.Unlock()

	beingDeleted := func(gs *unstructured.Unstructured) bool {
		return gs.GetDeletionTimestamp() != nil || pending[gs.GetName()]
	}
	deletable := func(gs *unstructured.Unstructured) bool {
		st := State(gs)
		return !(st == "Allocated" || st == "Reserved") || gs.GetDeletionTimestamp() != nil
	}
	// computeReconciliationAction
	var up, deleteCount int32
	var candidates []*unstructured.Unstructured
	for _, gs := range list {
		if !deletable(gs) {
			up++
		}
	}
	for _, gs := range list {
		if !deletable(gs) || beingDeleted(gs) {
			continue
		}
		switch State(gs) {
		case "Unhealthy", "Error":
			continue // scheduled for deletion in Agones; none here
		case "Shutdown":
			continue
		}
		if up >= spec {
			deleteCount++
		} else {
			up++
		}
		candidates = append(candidates, gs)
	}
	add := int32(0)
	if up < spec {
		add = spec - up
	}
	sort.SliceStable(candidates, func(i, j int) bool {
		a, b := candidates[i], candidates[j]
		ab, bb := beforeReady(a), beforeReady(b)
		if ab != bb {
			return ab
		}
		return a.GetName() < b.GetName()
	})
	var toDelete []*unstructured.Unstructured
	if deleteCount > 0 {
		toDelete = candidates[:deleteCount]
	}
	for i := int32(0); i < add; i++ {
		f.mu.Lock()
		s.serial++
		name := fmt.Sprintf("%s-%d", s.name, s.serial)
		f.mu.Unlock()
		gs := NewGameServer(name, false)
		l := map[string]string{FleetLabel: f.name, GameServerSetLabel: s.name}
		for k, v := range tmpl.labels {
			l[k] = v
		}
		gs.SetLabels(l)
		gs.SetAnnotations(tmpl.annotations)
		_ = unstructured.SetNestedField(gs.Object, "Scheduled", "status", "state")
		if _, err := f.ctrl.Resource(GameServerGVR).Namespace(f.ns).Create(ctx, gs, metav1.CreateOptions{}); err != nil {
			f.fail("create %s: %v", name, err)
			return
		}
	}
	for _, gs := range toDelete {
		was := State(gs)
		cp := gs.DeepCopy()
		_ = unstructured.SetNestedField(cp.Object, "Shutdown", "status", "state")
		got, err := f.ctrl.Resource(GameServerGVR).Namespace(f.ns).Update(ctx, cp, metav1.UpdateOptions{})
		if err != nil {
			// Agones logs the error, skips the status update and retries the set.
			f.fail("error updating gameserver %s from status %s to Shutdown status: %v", gs.GetName(), was, err)
			return
		}
		f.mu.Lock()
		s.pending[gs.GetName()] = true
		pending[gs.GetName()] = true
		f.shutdowns = append(f.shutdowns, ShutdownRecord{Name: gs.GetName(), Set: s.name, WasState: was,
			GotState: State(got), GotOutcome: Annotation(got, OutcomeKey), At: time.Now()})
		f.mu.Unlock()
	}
	// computeStatus over the listed servers (new ones are counted from the next pass's list).
	var st SetStatus
	for _, gs := range list {
		if beingDeleted(gs) {
			st.ShutdownReplicas++
			continue
		}
		st.Replicas++
		switch State(gs) {
		case "Ready":
			st.ReadyReplicas++
		case "Allocated":
			st.AllocatedReplicas++
		case "Reserved":
			st.ReservedReplicas++
		}
	}
	st.Replicas += add
	f.mu.Lock()
	s.status = st
	f.mu.Unlock()
}

// beforeReady: Agones' IsBeforeReady (states before Ready).
func beforeReady(gs *unstructured.Unstructured) bool {
	switch State(gs) {
	case "", "PortAllocation", "Creating", "Starting", "Scheduled", "RequestReady":
		return true
	}
	return false
}
