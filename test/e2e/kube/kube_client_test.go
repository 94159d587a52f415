package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	Ev, Name, Rv, State string
	Ms                  int
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
