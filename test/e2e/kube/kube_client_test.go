package kube

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agones-allocating-webhook/e2e/harness"
)

func TestVerbs(t *testing.T) {
	cp := harness.Setup(t)
	ns := cp.Namespace(t)
	lines, err := runSmoke(t, cp.Kubeconfig, harness.Admin, "verbs", ns)
	if err != nil || lines[len(lines)-1] != "PASS verbs" {
		t.Fatalf("verbs scenario failed: %v\n%s", err, strings.Join(lines, "\n"))
	}
	for _, want := range []string{"ok update-stale (HTTP 409 Conflict", "ok create-duplicate (HTTP 409 AlreadyExists",
		"ok get-deleted (HTTP 404 NotFound", "ok patch-json-stale (HTTP 422"} {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, want)
		}
		if !found {
			t.Errorf("no line starting with %q in\n%s", want, strings.Join(lines, "\n"))
		}
	}
}

func TestPagination(t *testing.T) {
	cp := harness.Setup(t)
	ns := cp.Namespace(t)
	cs := cp.Clientset(t, harness.Admin)
	for i := 0; i < 7; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("page-%d", i), Labels: map[string]string{"page": "yes"}}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(harness.Ctx(t), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "not-a-page"}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(harness.Ctx(t), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lines, err := runSmoke(t, cp.Kubeconfig, harness.Admin, "paginate", ns, "3")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Items, Pages    int
		ResourceVersion string
	}
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatalf("%v: %s", err, lines[0])
	}
	if got.Items != 7 || got.Pages != 3 || got.ResourceVersion == "" {
		t.Fatalf("want 7 items over 3 pages with a resourceVersion, got %+v", got)
	}
}

func TestEvents(t *testing.T) {
	cp := harness.Setup(t)
	ns := cp.Namespace(t)
	gs := cp.CreateReadyGameServer(t, ns, harness.NewGameServer("ev-gs", true))
	lines, err := runSmoke(t, cp.Kubeconfig, harness.Resolver, "events", ns, gs.GetName())
	if err != nil || lines[len(lines)-1] != "PASS events" {
		t.Fatalf("events scenario: %v\n%s", err, strings.Join(lines, "\n"))
	}
	evs, err := cp.Clientset(t, harness.Admin).CoreV1().Events(ns).List(harness.Ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byReason := map[string]corev1.Event{}
	for _, e := range evs.Items {
		if _, dup := byReason[e.Reason]; dup {
			t.Errorf("more than one Event with reason %s (aggregation failed)", e.Reason)
		}
		byReason[e.Reason] = e
	}
	rep, ok := byReason["SmokeRepeated"]
	if !ok {
		t.Fatalf("no SmokeRepeated event among %d events", len(evs.Items))
	}
	if rep.Count != 3 || rep.Type != "Normal" || rep.Source.Component != "allocating-webhook" ||
		rep.InvolvedObject.UID != gs.GetUID() || rep.InvolvedObject.Kind != "GameServer" || rep.Message != "same message" {
		t.Errorf("SmokeRepeated event: count=%d type=%s component=%s uid=%s kind=%s msg=%q", rep.Count, rep.Type,
			rep.Source.Component, rep.InvolvedObject.UID, rep.InvolvedObject.Kind, rep.Message)
	}
	other, ok := byReason["SmokeOther"]
	if !ok || other.Type != "Warning" || other.Count != 1 {
		t.Errorf("SmokeOther event: present=%v %+v", ok, other)
	}
}

// writeTokenKubeconfig writes a kubeconfig whose user reads its token from tokenFile.
func writeTokenKubeconfig(t *testing.T, cp *harness.ControlPlane, tokenFile string) string {
	t.Helper()
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: rot
clusters:
- name: e2e
  cluster: {server: %q, certificate-authority: %q}
contexts:
- name: rot
  context: {cluster: e2e, user: rot}
users:
- name: rot
  user: {tokenFile: %q}
`, cp.APIServerURL, cp.CAFile, tokenFile)
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeAtomically replaces path like the kubelet rotates projected tokens (write + rename).
func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestTokenFileRotation(t *testing.T) {
	cp := harness.Setup(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeAtomically(t, tokenFile, cp.Token(t, harness.Resolver)+"\n")
	kc := writeTokenKubeconfig(t, cp, tokenFile)
	// get-loop GETs the GameServer CRD (the resolver identity may) every 100ms.
	p := startSmoke(t, kc, "rot", "get-loop", "gameservers.agones.dev")
	count := func(s string) int {
		n := 0
		for _, l := range p.snapshot() {
			if l == s {
				n++
			}
		}
		return n
	}
	if !waitFor(10*time.Second, func() bool { return count("ok") >= 5 }) {
		t.Fatalf("no successful calls with the first token: %v", p.snapshot())
	}
	// A revoked/garbage token: calls fail with 401 within a few seconds.
	writeAtomically(t, tokenFile, "not-a-valid-token\n")
	if !waitFor(10*time.Second, func() bool { return count("err 401") >= 2 }) {
		t.Fatalf("the rewritten (invalid) token was not picked up: %v", p.snapshot())
	}
	// The rotated, valid token (a second token of the same service account): calls succeed again.
	okBefore := count("ok")
	writeAtomically(t, tokenFile, cp.Token(t, harness.Resolver2)+"\n")
	if !waitFor(10*time.Second, func() bool { return count("ok") >= okBefore+5 }) {
		t.Fatalf("the rotated token was not picked up: %v", p.snapshot())
	}
	lines := p.snapshot()
	if last := lines[len(lines)-1]; last != "ok" {
		t.Fatalf("last call with the rotated token: %s", last)
	}
}

// ensureFastCompaction restarts kube-apiserver once for the package so that it compacts etcd every
// second (old resourceVersions expire, 410, quickly) and accepts client certificates signed by the
// control plane's CA (for TestClientCertificateAuth).
var fastCompaction bool

func ensureFastCompaction(t *testing.T, cp *harness.ControlPlane) {
	if !fastCompaction {
		cp.RestartAPIServer(t, []string{"--etcd-compaction-interval=1s", "--client-ca-file=" + cp.CAFile})
		fastCompaction = true
	}
}

func TestWatchExpired(t *testing.T) {
	cp := harness.Setup(t)
	ns := cp.Namespace(t)
	ensureFastCompaction(t, cp)
	cs := cp.Clientset(t, harness.Admin)
	// Some writes, then wait for two compaction rounds so resourceVersion 1 is long gone.
	for i := 0; i < 3; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i)}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(harness.Ctx(t), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var lines []string
	ok := waitFor(20*time.Second, func() bool {
		var err error
		lines, err = runSmoke(t, cp.Kubeconfig, harness.Admin, "watch-expired", ns)
		return err == nil
	})
	if !ok {
		t.Fatalf("a watch from resourceVersion 1 never ended with 410 Expired: %v", lines)
	}
	if !strings.HasPrefix(lines[0], "expired 410") {
		t.Fatalf("want an expired 410 line, got %q", lines[0])
	}
	t.Logf("watch from an expired resourceVersion: %s", lines[0])
}

type cacheEvent struct {
	Ev, Op, Name, Rv, State string
	Ms                      int
}

func parseEvents(t *testing.T, lines []string) []cacheEvent {
	var out []cacheEvent
	for _, l := range lines {
		var e cacheEvent
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("bad informer line %q: %v", l, err)
		}
		out = append(out, e)
	}
	return out
}

// cacheState replays upsert/delete events into name -> resourceVersion.
func cacheState(evs []cacheEvent) map[string]string {
	m := map[string]string{}
	for _, e := range evs {
		switch e.Ev {
		case "upsert":
			m[e.Name] = e.Rv
		case "delete":
			delete(m, e.Name)
		}
	}
	return m
}

func TestGameServerCacheSurvivesRestartAndExpiry(t *testing.T) {
	cp := harness.Setup(t)
	ns := cp.Namespace(t)
	ensureFastCompaction(t, cp)
	dyn := cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(ns)
	ctx := harness.Ctx(t)
	create := func(name string, optIn bool) {
		if _, err := dyn.Create(ctx, harness.NewGameServer(name, optIn), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	annotate := func(name, v string) {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"e2e":%q}}}`, v)
		if _, err := dyn.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	serverState := func() map[string]string {
		l, err := dyn.List(context.Background(), metav1.ListOptions{LabelSelector: harness.EnabledLabel + "=true"})
		if err != nil {
			return nil
		}
		m := map[string]string{}
		for _, i := range l.Items {
			m[i.GetName()] = i.GetResourceVersion()
		}
		return m
	}
	for _, n := range []string{"a", "b", "c"} {
		create(n, true)
	}
	create("plain", false)

	p := startSmoke(t, cp.Kubeconfig, harness.Resolver, "informer", ns)
	converged := func() bool {
		want := serverState()
		got := cacheState(parseEvents(t, p.snapshot()))
		if want == nil || len(want) != len(got) {
			return false
		}
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return true
	}
	if !waitFor(15*time.Second, converged) {
		t.Fatalf("cache never matched the server after the first list: %v", p.snapshot())
	}
	annotate("a", "1")
	if !waitFor(10*time.Second, converged) {
		t.Fatalf("cache missed a MODIFIED event: %v", p.snapshot())
	}

	// Stop kube-apiserver long enough for the client's backoff to grow, restart it, and change
	// objects at once: the cache resumes (or re-lists after a 410, since etcd compacts every
	// second) and must end equal to the server, with every change delivered once.
	cp.StopAPIServer(t)
	time.Sleep(4 * time.Second)
	cp.StartAPIServer(t, nil)
	if err := dyn.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	annotate("c", "2")
	create("d", true)
	annotate("a", "3")
	time.Sleep(2500 * time.Millisecond) // > 2 compaction rounds
	annotate("d", "4")
	if !waitFor(45*time.Second, converged) {
		t.Fatalf("cache did not converge after the restart: server %v, cache %v\n%v", serverState(),
			cacheState(parseEvents(t, p.snapshot())), p.snapshot())
	}
	evs := parseEvents(t, p.snapshot())
	seen := map[string]int{}
	syncs, deletesB := 0, 0
	for _, e := range evs {
		switch e.Ev {
		case "upsert":
			seen[e.Name+"@"+e.Rv]++
			if e.Name == "plain" {
				t.Errorf("a GameServer without the opt-in label reached the cache")
			}
		case "delete":
			if e.Name == "b" {
				deletesB++
			}
		case "synced":
			syncs++
		}
	}
	for k, n := range seen {
		if n > 1 {
			t.Errorf("upsert %s delivered %d times", k, n)
		}
	}
	if deletesB != 1 {
		t.Errorf("delete of b delivered %d times, want 1", deletesB)
	}
	t.Logf("full lists: %d (more than 1 = re-listed after the watch expired)", syncs)
	start := time.Now()
	if !p.stop(5 * time.Second) {
		t.Fatal("informer did not stop within 5s")
	}
	last := parseEvents(t, p.snapshot())
	if l := last[len(last)-1]; l.Ev != "stopped" || l.Ms > 2000 {
		t.Errorf("stop: %+v (took %v)", l, time.Since(start))
	}
}

// etcdBump advances etcd's revision with a key outside /registry while kube-apiserver is down, so
// that the restarted server's watch cache starts after the informer's last resourceVersion: the
// informer's resumed watch then ends with 410 Expired for certain (not by timing), and it re-lists.
func etcdBump(t *testing.T, cp *harness.ControlPlane) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cp.Dir, "state.env"))
	if err != nil {
		t.Fatal(err)
	}
	port := ""
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "ETCD_PORT="); ok {
			port = strings.TrimSpace(v)
		}
	}
	if port == "" {
		t.Fatalf("no ETCD_PORT in %s/state.env", cp.Dir)
	}
	body := fmt.Sprintf(`{"key":%q,"value":%q}`, base64.StdEncoding.EncodeToString([]byte("/e2e-bump")),
		base64.StdEncoding.EncodeToString([]byte(time.Now().String())))
	for i := 0; i < 3; i++ {
		resp, err := http.Post("http://127.0.0.1:"+port+"/v3/kv/put", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("etcd put: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("etcd put: HTTP %d", resp.StatusCode)
		}
	}
}

// inParallel runs fn(0..n-1) on 8 goroutines and returns the first error.
func inParallel(n int, fn func(i int) error) error {
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// checkDelivery replays the informer's events and returns every violation of "nothing missed,
// nothing seen twice": per object the resourceVersions delivered strictly increase (a delete
// carries the last known one or later), an add only for an object not held, an update or delete
// only for one held, a delete only of an object that left the server (mayDelete), and at the end
// the cache holds exactly the server's objects at the server's resourceVersions.
func checkDelivery(evs []cacheEvent, server map[string]string, mayDelete map[string]bool) []string {
	var bad []string
	held := map[string]bool{}
	last := map[string]int64{}
	for i, e := range evs {
		if e.Ev != "upsert" && e.Ev != "delete" {
			continue
		}
		rv, err := strconv.ParseInt(e.Rv, 10, 64)
		if err != nil {
			bad = append(bad, fmt.Sprintf("#%d %s %s: resourceVersion %q", i, e.Ev, e.Name, e.Rv))
			continue
		}
		prev, seen := last[e.Name]
		switch {
		case e.Ev == "upsert" && e.Op == "add" && held[e.Name]:
			bad = append(bad, fmt.Sprintf("#%d add of %s, already held", i, e.Name))
		case e.Ev == "upsert" && e.Op != "add" && !held[e.Name]:
			bad = append(bad, fmt.Sprintf("#%d %s of %s, not held", i, e.Op, e.Name))
		case e.Ev == "upsert" && seen && rv <= prev:
			bad = append(bad, fmt.Sprintf("#%d %s of %s at rv %d after rv %d", i, e.Op, e.Name, rv, prev))
		case e.Ev == "delete" && !held[e.Name]:
			bad = append(bad, fmt.Sprintf("#%d delete of %s, not held", i, e.Name))
		case e.Ev == "delete" && rv < prev:
			bad = append(bad, fmt.Sprintf("#%d delete of %s at rv %d after rv %d", i, e.Name, rv, prev))
		case e.Ev == "delete" && !mayDelete[e.Name]:
			bad = append(bad, fmt.Sprintf("#%d delete of %s, which the test never removed", i, e.Name))
		}
		last[e.Name] = rv
		held[e.Name] = e.Ev == "upsert"
	}
	for name, rv := range server {
		if !held[name] {
			bad = append(bad, fmt.Sprintf("%s (rv %s) on the server, not in the cache", name, rv))
		} else if strconv.FormatInt(last[name], 10) != rv {
			bad = append(bad, fmt.Sprintf("%s: cache ends at rv %d, server at %s", name, last[name], rv))
		}
	}
	for name, h := range held {
		if _, ok := server[name]; h && !ok {
			bad = append(bad, fmt.Sprintf("%s in the cache, not on the server", name))
		}
	}
	sort.Strings(bad)
	return bad
}

// gameServerWatches is kube-apiserver's apiserver_request_total for GameServer WATCH requests (all
// codes and scopes): the watches that have ended.
func gameServerWatches(t *testing.T, cp *harness.ControlPlane) float64 {
	t.Helper()
	body, err := cp.Clientset(t, harness.Admin).CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(harness.Ctx(t))
	if err != nil {
		t.Fatalf("kube-apiserver /metrics: %v", err)
	}
	n := 0.0
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "apiserver_request_total{") && strings.Contains(l, `resource="gameservers"`) &&
			strings.Contains(l, `verb="WATCH"`) {
			if v, err := strconv.ParseFloat(strings.TrimSpace(l[strings.LastIndexByte(l, '}')+1:]), 64); err == nil {
				n += v
			}
		}
	}
	return n
}

func countEv(evs []cacheEvent, ev string) int {
	n := 0
	for _, e := range evs {
		if e.Ev == ev {
			n++
		}
	}
	return n
}

// TestGameServerCacheAtScale: a few hundred opted-in GameServers (and some that are not) through
// the informer of the webhook's GameServer cache (paged list, raw watch, bookmarks): the first list
// equals the server; a watch that the server ends on its timeout resumes without a re-list; changes
// across a kube-apiserver restart whose watch cache starts after the informer's resourceVersion
// (410) are delivered by a re-list that carries only the difference; and over the whole run
// nothing is missed and nothing is delivered twice (checkDelivery).
func TestGameServerCacheAtScale(t *testing.T) {
	const optedIn, plain = 300, 40
	cp := harness.Setup(t)
	ns := cp.Namespace(t)
	ensureFastCompaction(t, cp)
	start := time.Now()
	dyn := cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(ns)
	ctx := harness.Ctx(t)
	optName := func(i int) string { return fmt.Sprintf("gs-%03d", i) }
	plainName := func(i int) string { return fmt.Sprintf("plain-%03d", i) }
	if err := inParallel(optedIn+plain, func(i int) error {
		gs := harness.NewGameServer(optName(i), true)
		if i >= optedIn {
			gs = harness.NewGameServer(plainName(i-optedIn), false)
		}
		_, err := dyn.Create(ctx, gs, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	patch := func(name, p string) error {
		_, err := dyn.Patch(ctx, name, types.MergePatchType, []byte(p), metav1.PatchOptions{})
		return err
	}
	annotate := func(name, v string) error {
		return patch(name, fmt.Sprintf(`{"metadata":{"annotations":{"e2e":%q}}}`, v))
	}
	serverState := func() map[string]string {
		l, err := dyn.List(context.Background(), metav1.ListOptions{LabelSelector: harness.EnabledLabel + "=true"})
		if err != nil {
			return nil
		}
		m := map[string]string{}
		for _, i := range l.Items {
			m[i.GetName()] = i.GetResourceVersion()
		}
		return m
	}
	t.Logf("created %d opted-in and %d other GameServers in %v", optedIn, plain, time.Since(start).Round(time.Millisecond))

	// Watches the server ends after 2-4 s (timeoutSeconds, randomised); lists in pages of 100.
	p := startSmoke(t, cp.Kubeconfig, harness.Resolver, "informer", ns, "2", "100")
	var server map[string]string
	converged := func() bool {
		server = serverState()
		got := cacheState(parseEvents(t, p.snapshot()))
		if server == nil || len(server) != len(got) {
			return false
		}
		for k, v := range server {
			if got[k] != v {
				return false
			}
		}
		return true
	}
	mayDelete := map[string]bool{}
	check := func(phase string) []cacheEvent {
		t.Helper()
		evs := parseEvents(t, p.snapshot())
		if bad := checkDelivery(evs, server, mayDelete); len(bad) > 0 {
			if len(bad) > 20 {
				bad = append(bad[:20], fmt.Sprintf("... %d more", len(bad)-20))
			}
			t.Fatalf("%s: %d violations:\n%s", phase, len(bad), strings.Join(bad, "\n"))
		}
		return evs
	}

	// 1. The first list.
	// The list is applied page by page, so the cache may equal the server a moment before the
	// list's `synced` line.
	if !waitFor(20*time.Second, func() bool { return converged() && countEv(parseEvents(t, p.snapshot()), "synced") > 0 }) {
		t.Fatalf("cache never matched the server after the first list (%d events)", len(p.snapshot()))
	}
	evs := check("first list")
	if n := countEv(evs, "upsert"); n != optedIn {
		t.Fatalf("first list: %d upserts, want %d", n, optedIn)
	}
	syncs := countEv(evs, "synced")
	t.Logf("first list converged after %v (%d full lists)", time.Since(start).Round(time.Millisecond), syncs)

	// 2. The watch ends on its timeout (2-4 s) at least twice during 9 s of changes: the informer
	// resumes from the last event or bookmark, so no re-list (no `synced` line) happens.
	resumeStart := time.Now()
	watches0 := gameServerWatches(t, cp)
	for round := 0; round < 6; round++ {
		for k := 0; k < 5; k++ {
			if err := annotate(optName(round*5+k), fmt.Sprintf("r%d", round)); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(1500 * time.Millisecond)
	}
	if !waitFor(10*time.Second, converged) {
		t.Fatalf("cache missed updates across watch timeouts: %v", checkDelivery(parseEvents(t, p.snapshot()), serverState(), mayDelete))
	}
	evs = check("watch timeouts")
	if n := countEv(evs, "synced"); n != syncs {
		t.Errorf("the informer re-listed (%d full lists, want %d) although its watches only timed out "+
			"over %v: a reconnect must resume from the last event or bookmark", n, syncs,
			time.Since(resumeStart).Round(time.Second))
	}
	// kube-apiserver counts a WATCH when it ends: the informer's (the only GameServer watcher here)
	// did end and reconnect meanwhile.
	if ended := gameServerWatches(t, cp) - watches0; ended < 2 {
		t.Errorf("only %v GameServer watches ended over %v; the 2-4 s watch timeout was not exercised", ended,
			time.Since(resumeStart).Round(time.Second))
	} else {
		t.Logf("watch timeouts: %v watches ended and resumed without a re-list", ended)
	}
	syncs = countEv(evs, "synced")

	// 3. kube-apiserver down, etcd's revision moved on (so the restarted watch cache begins after the
	// informer's resourceVersion: 410), then changes of every kind at once.
	mark := len(p.snapshot())
	cp.StopAPIServer(t)
	etcdBump(t, cp)
	time.Sleep(2 * time.Second)
	cp.StartAPIServer(t, nil)
	changed := map[string]bool{}
	var mu sync.Mutex
	note := func(name string, gone bool) {
		mu.Lock()
		defer mu.Unlock()
		changed[name] = true
		if gone {
			mayDelete[name] = true
		}
	}
	// 40 updates, 20 deletes, 10 opt-outs (leave the selector), 10 opt-ins, 20 creations.
	if err := inParallel(100, func(i int) error {
		switch {
		case i < 40:
			note(optName(100+i), false)
			return annotate(optName(100+i), "restart")
		case i < 60:
			note(optName(100+i), true)
			return dyn.Delete(ctx, optName(100+i), metav1.DeleteOptions{})
		case i < 70:
			note(optName(100+i), true)
			return patch(optName(100+i), fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, harness.EnabledLabel))
		case i < 80:
			note(plainName(i-70), false)
			return patch(plainName(i-70), fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, harness.EnabledLabel))
		default:
			note(optName(optedIn+i-80), false)
			_, err := dyn.Create(ctx, harness.NewGameServer(optName(optedIn+i-80), true), metav1.CreateOptions{})
			return err
		}
	}); err != nil {
		t.Fatal(err)
	}
	if !waitFor(40*time.Second, converged) {
		t.Fatalf("cache did not converge after the restart: %v", checkDelivery(parseEvents(t, p.snapshot()), serverState(), mayDelete))
	}
	evs = check("restart and 410")
	if n := countEv(evs, "synced"); n != syncs+1 {
		t.Errorf("after the restart with a 410: %d full lists, want %d (one re-list)", n, syncs+1)
	}
	// Only the difference: after the restart exactly one event per changed object, none for the
	// ~260 unchanged ones.
	after := map[string]int{}
	for _, e := range evs[mark:] {
		if e.Ev == "upsert" || e.Ev == "delete" {
			after[e.Name]++
		}
	}
	for name, n := range after {
		if !changed[name] || n != 1 {
			t.Errorf("after the restart: %d events for %s (changed: %v), want exactly one per changed object", n, name, changed[name])
		}
	}
	if len(after) != len(changed) {
		t.Errorf("after the restart: events for %d objects, %d changed", len(after), len(changed))
	}
	t.Logf("restart: %d objects changed, %d delivered, %d objects cached; total %v", len(changed), len(after),
		len(server), time.Since(start).Round(time.Millisecond))
	if !p.stop(5 * time.Second) {
		t.Fatal("informer did not stop within 5s")
	}
}
