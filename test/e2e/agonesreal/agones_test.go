package agonesreal

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agones-allocating-webhook/e2e/harness"
)

// TestMain runs the package only when the real Agones has been built (AW_AGONES_BIN, set by
// test/e2e/agonesreal/run, i.e. `scripts/test --only agones`); otherwise it says why and passes
// without starting a control plane, so the default e2e run is unchanged.
func TestMain(m *testing.M) {
	if BinDir() == "" || os.Getenv("AGONES_SRC") == "" {
		fmt.Println("agonesreal: skipped: the real Agones is not built (AW_AGONES_BIN/AGONES_SRC unset); " +
			"run AGONES_SRC=<agones source tree> scripts/test --only agones (docs/development.md)")
		os.Exit(0)
	}
	harness.Main(m)
}

var fleetGVR = schema.GroupVersionResource{Group: "agones.dev", Version: "v1", Resource: "fleets"}

// env is one test's Agones + webhook/resolver and a namespace with its SDK identity.
type env struct {
	cp  *harness.ControlPlane
	ag  *Agones
	wh  *harness.Webhook
	ns  string
	sdk *harness.SDK
}

func setup(t *testing.T, opts Options, resolverArgs ...string) *env {
	t.Helper()
	cp := harness.Setup(t)
	ag := Start(t, cp, opts)
	// Agones' own CRDs were just applied: the gate needs Allocating in the enum (the CRD guard's job
	// in a cluster).
	cp.AddAllocatingToEnum(t)
	e := &env{cp: cp, ag: ag}
	e.wh = cp.StartResolver(t, "resolver", resolverArgs...)
	e.ns = cp.Namespace(t)
	e.sdk = cp.SDK(t, e.ns)
	ag.Kubelet.AddSDK(e.ns, harness.SDKServiceAccount, e.sdk.Kubeconfig)
	t.Logf("Agones %s: controller, extensions, allocator %s; game server ports %d-%d",
		ag.Version, ag.AllocatorURL, ag.MinPort, ag.MaxPort)
	return e
}

// fleet creates a Fleet of the simple-game-server, opted in with annotations (key, value pairs).
func (e *env) fleet(t *testing.T, name string, replicas int64, optIn bool, annotations ...string) *unstructured.Unstructured {
	t.Helper()
	labels := map[string]interface{}{}
	if optIn {
		labels[harness.EnabledLabel] = "true"
	}
	ann := map[string]interface{}{}
	for i := 0; i+1 < len(annotations); i += 2 {
		ann[annotations[i]] = annotations[i+1]
	}
	f := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "agones.dev/v1", "kind": "Fleet",
		"metadata": map[string]interface{}{"name": name, "namespace": e.ns},
		"spec": map[string]interface{}{
			"replicas": replicas,
			"template": map[string]interface{}{
				"metadata": map[string]interface{}{"labels": labels, "annotations": ann},
				"spec": map[string]interface{}{
					"ports": []interface{}{map[string]interface{}{
						"name": "default", "portPolicy": "Dynamic", "containerPort": int64(7654), "protocol": "UDP"}},
					"template": map[string]interface{}{"spec": map[string]interface{}{
						"containers": []interface{}{map[string]interface{}{
							"name": "simple-game-server", "image": "simple-game-server:fake-kubelet"}}}},
				},
			},
		},
	}}
	got, err := e.cp.Dynamic(t, harness.Admin).Resource(fleetGVR).Namespace(e.ns).Create(harness.Ctx(t), f, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Fleet: %v", err)
	}
	return got
}

// waitFleetReady waits until the Fleet has n Ready replicas.
func (e *env) waitFleetReady(t *testing.T, name string, n int64, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var last *unstructured.Unstructured
	ok := harness.Poll(timeout, 200*time.Millisecond, func() bool {
		f, err := e.cp.Dynamic(t, harness.Admin).Resource(fleetGVR).Namespace(e.ns).Get(harness.Ctx(t), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		last = f
		r, _, _ := unstructured.NestedInt64(f.Object, "status", "readyReplicas")
		return r == n
	})
	if !ok {
		st, _, _ := unstructured.NestedMap(last.Object, "status")
		e.ag.dumpLogs(t)
		t.Fatalf("Fleet %s: not %d Ready within %s: status %v; servers: %s", name, n, timeout, st, e.servers(t))
	}
	return time.Since(start)
}

// servers describes every GameServer of the namespace (name state).
func (e *env) servers(t *testing.T) string {
	list, err := e.cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(e.ns).List(harness.Ctx(t), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, gs := range list.Items {
		parts = append(parts, gs.GetName()+"="+harness.State(&gs))
	}
	return strings.Join(parts, " ")
}

// allocation is the allocator's answer (REST, protojson with proto names).
type allocation struct {
	GameServerName string `json:"gameServerName"`
	Address        string `json:"address"`
	Ports          []struct {
		Name string `json:"name"`
		Port int    `json:"port"`
	} `json:"ports"`
	Metadata struct {
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
}

// allocateREST posts a GameServerAllocation request for the Fleet to url (the real allocator or
// the gateway) with client c.
func allocateREST(ctx context.Context, c *http.Client, url, ns, fleet string) (*allocation, int, string, error) {
	body := fmt.Sprintf(`{"namespace":%q,"gameServerSelectors":[{"matchLabels":{"agones.dev/fleet":%q}}]}`, ns, fleet)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/gameserverallocation", strings.NewReader(body))
	if err != nil {
		return nil, 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		return nil, 0, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return nil, res.StatusCode, string(b), nil
	}
	var a allocation
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, res.StatusCode, string(b), err
	}
	return &a, res.StatusCode, string(b), nil
}

// command sends one simple-game-server command over UDP to port and returns its answer.
func command(t *testing.T, port int, cmd string) string {
	t.Helper()
	c, err := net.Dial("udp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 1024)
	for i := 0; i < 10; i++ {
		if _, err := c.Write([]byte(cmd + "\n")); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		n, err := c.Read(buf)
		if err == nil {
			return strings.TrimSpace(string(buf[:n]))
		}
	}
	t.Fatalf("game server on UDP %d: no answer to %q", port, cmd)
	return ""
}

// The gate and the confirmation through the real SDK sidecar: the real allocator allocates a
// server of a real Fleet; the gate holds it Allocating; the real simple-game-server confirms
// (ANNOTATION allocating-ready <id>, i.e. SDK SetAnnotation through the real sidecar and its
// 500 ms rate limit); the resolver promotes it to Allocated.
func TestGateAndConfirmationThroughSDK(t *testing.T) {
	e := setup(t, Options{})
	e.fleet(t, "confirm", 2, true, harness.TimeoutKey, "60s")
	took := e.waitFleetReady(t, "confirm", 2, 90*time.Second)
	t.Logf("Fleet of 2 Ready in %s (real controller, fake node, real sidecars)", took.Round(time.Millisecond))

	client := harness.HTTPSClient(t, e.ag.AllocatorCA, e.ag.ClientCert, e.ag.ClientKey)
	start := time.Now()
	a, code, body, err := allocateREST(harness.Ctx(t), client, e.ag.AllocatorURL, e.ns, "confirm")
	if err != nil || a == nil {
		t.Fatalf("allocate through agones-allocator: %v (HTTP %d) %s", err, code, body)
	}
	t.Logf("agones-allocator answered in %s: %s %s:%v", time.Since(start).Round(time.Millisecond), a.GameServerName, a.Address, a.Ports)
	gs := e.cp.GetGameServer(t, e.ns, a.GameServerName)
	if harness.State(gs) != "Allocating" {
		t.Fatalf("allocated server not held: %s", harness.Describe(gs))
	}
	id := harness.Annotation(gs, harness.AllocationKey)
	if id == "" || len(a.Ports) == 0 {
		t.Fatalf("no allocation id or port: %s", harness.Describe(gs))
	}
	// Nothing confirms: it stays Allocating.
	time.Sleep(2 * time.Second)
	if s := harness.State(e.cp.GetGameServer(t, e.ns, a.GameServerName)); s != "Allocating" {
		t.Fatalf("unconfirmed server left Allocating: %s", s)
	}
	if got := command(t, a.Ports[0].Port, "ANNOTATION allocating-ready "+id); !strings.Contains(got, "ACK") {
		t.Fatalf("simple-game-server answered %q", got)
	}
	sent := time.Now()
	var sdkWrite time.Time
	ok := harness.Poll(20*time.Second, 20*time.Millisecond, func() bool {
		g := e.cp.GetGameServer(t, e.ns, a.GameServerName)
		if sdkWrite.IsZero() && harness.Annotation(g, harness.SdkReadyKey) == id {
			sdkWrite = time.Now()
		}
		return harness.State(g) == "Allocated"
	})
	gs = e.cp.GetGameServer(t, e.ns, a.GameServerName)
	if !ok {
		t.Fatalf("not Allocated 20s after the SDK confirmation: %s", harness.Describe(gs))
	}
	t.Logf("confirmation (UDP command) → Allocated: %s (the sidecar's write seen after %s; 500 ms rate limit)",
		time.Since(sent).Round(time.Millisecond), sdkWrite.Sub(sent).Round(time.Millisecond))
	if harness.Annotation(gs, harness.ConfirmedKey) == "" {
		t.Errorf("no %s on the promoted server: %s", harness.ConfirmedKey, harness.Describe(gs))
	}
	// Back to Ready through the SDK: the next allocation is gated again.
	if got := command(t, a.Ports[0].Port, "READY"); !strings.Contains(got, "ACK") {
		t.Fatalf("READY: %q", got)
	}
	e.cp.WaitForState(t, e.ns, a.GameServerName, "Ready", 20*time.Second)
}

var gsaGVR = schema.GroupVersionResource{Group: "allocation.agones.dev", Version: "v1", Resource: "gameserverallocations"}

// The same gate and confirmation through the GameServerAllocation API (the aggregated API that
// agones-extensions serves, as Open Match's examples allocate): kube-apiserver calls no admission
// webhook for the allocation itself; the gate acts on the extensions' UPDATE of the GameServer.
func TestGameServerAllocationAPI(t *testing.T) {
	ip := HostIP()
	if ip == "" {
		t.Skip("no non-loopback IPv4 address here: kube-apiserver refuses loopback endpoints for the extensions' Service")
	}
	cp := harness.Setup(t)
	// Aggregated APIs reached through their Service's endpoints (there is no kube-proxy for the
	// ClusterIP); kept for the package's later tests, which do not mind.
	cp.RestartAPIServer(t, []string{"--enable-aggregator-routing=true"})
	e := setup(t, Options{})
	e.ag.ServeAllocationAPI(t, ip)
	e.fleet(t, "gsa", 2, true, harness.TimeoutKey, "60s")
	e.waitFleetReady(t, "gsa", 2, 90*time.Second)
	gsa := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "allocation.agones.dev/v1", "kind": "GameServerAllocation",
		"metadata": map[string]interface{}{"generateName": "match-", "namespace": e.ns},
		"spec": map[string]interface{}{"selectors": []interface{}{
			map[string]interface{}{"matchLabels": map[string]interface{}{"agones.dev/fleet": "gsa"}}}},
	}}
	start := time.Now()
	got, err := e.cp.Dynamic(t, harness.Admin).Resource(gsaGVR).Namespace(e.ns).Create(harness.Ctx(t), gsa, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create GameServerAllocation: %v", err)
	}
	state, _, _ := unstructured.NestedString(got.Object, "status", "state")
	name, _, _ := unstructured.NestedString(got.Object, "status", "gameServerName")
	ports, _, _ := unstructured.NestedSlice(got.Object, "status", "ports")
	t.Logf("GameServerAllocation answered in %s: state %s, %s", time.Since(start).Round(time.Millisecond), state, name)
	if name == "" || len(ports) == 0 {
		t.Fatalf("no server allocated: %v", got.Object["status"])
	}
	port, _, _ := unstructured.NestedInt64(ports[0].(map[string]interface{}), "port")
	gs := e.cp.GetGameServer(t, e.ns, name)
	if harness.State(gs) != "Allocating" {
		t.Fatalf("allocated server not held: %s", harness.Describe(gs))
	}
	id := harness.Annotation(gs, harness.AllocationKey)
	if got := command(t, int(port), "ANNOTATION allocating-ready "+id); !strings.Contains(got, "ACK") {
		t.Fatalf("simple-game-server answered %q", got)
	}
	sent := time.Now()
	if !harness.Poll(20*time.Second, 20*time.Millisecond, func() bool {
		return harness.State(e.cp.GetGameServer(t, e.ns, name)) == "Allocated"
	}) {
		t.Fatalf("not Allocated after the SDK confirmation: %s", harness.Describe(e.cp.GetGameServer(t, e.ns, name)))
	}
	t.Logf("confirmation → Allocated: %s", time.Since(sent).Round(time.Millisecond))
}
