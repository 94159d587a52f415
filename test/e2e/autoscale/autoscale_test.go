// Package autoscale tests the Buffer autoscaling webhook on a real kube-apiserver: opted-in
// GameServers of a fleet in Allocating are watched by the webhook, and a FleetAutoscaleReview
// POSTed exactly as Agones 1.56 sends it (pkg/fleetautoscalers applyWebhookPolicy and
// buildURLFromConfiguration: the struct marshalled with encoding/json, the URL built from
// service.path as url.URL.Path, an http.Client with the caBundle as RootCAs and a 15 s timeout)
// is answered with the Buffer arithmetic counting them as allocated.
package autoscale

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agones-allocating-webhook/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// The wire types of autoscaling.agones.dev/v1 (same JSON tags as Agones').
type fleetStatus struct {
	Replicas          int32 `json:"replicas"`
	ReadyReplicas     int32 `json:"readyReplicas"`
	ReservedReplicas  int32 `json:"reservedReplicas"`
	AllocatedReplicas int32 `json:"allocatedReplicas"`
}
type request struct {
	UID       string      `json:"uid"`
	Name      string      `json:"name"`
	Namespace string      `json:"namespace"`
	Status    fleetStatus `json:"status"`
}
type response struct {
	UID      string `json:"uid"`
	Scale    bool   `json:"scale"`
	Replicas int32  `json:"replicas"`
}
type review struct {
	Request  *request  `json:"request"`
	Response *response `json:"response"`
}

// agonesClient is the client Agones builds for a webhook with a caBundle.
func agonesClient(t *testing.T, caFile string) *http.Client {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no certs in caBundle")
	}
	return &http.Client{Timeout: 15 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// post sends the review to service.path = path the way Agones does; returns status and body.
func post(t *testing.T, c *http.Client, port int, path string, body []byte) (int, []byte) {
	u := &url.URL{Scheme: "https", Host: fmt.Sprintf("127.0.0.1:%d", port), Path: path}
	res, err := c.Post(u.String(), "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func TestBufferCountsAllocating(t *testing.T) {
	cp := harness.Setup(t)
	ns := cp.Namespace(t)
	cp.AddAllocatingToEnum(t)
	dyn := cp.Dynamic(t, harness.Admin)
	ctx := harness.Ctx(t)
	// Fleet "gated": 3 Allocating + 1 Ready opted-in servers; one Allocating server without the
	// opt-in label (not watched, must not count).
	mk := func(name, state string, optIn bool) {
		gs := harness.NewGameServer(name, optIn)
		labels := gs.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["agones.dev/fleet"] = "gated"
		gs.SetLabels(labels)
		gs.Object["status"] = map[string]interface{}{"state": state}
		if _, err := dyn.Resource(harness.GameServerGVR).Namespace(ns).Create(ctx, gs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("a1", "Allocating", true)
	mk("a2", "Allocating", true)
	mk("a3", "Allocating", true)
	mk("r1", "Ready", true)
	mk("x1", "Allocating", false)

	wh := cp.StartWebhook(t, harness.WebhookOptions{Args: []string{
		"--kubeconfig=" + cp.Kubeconfig, "--context=resolver", "--autoscale-buffer",
		"--leader-elect=false", "--crd-accepts-allocating=true"}})
	c := agonesClient(t, wh.CAFile)

	ask := func(path string, st fleetStatus, fleet string) (int, review, string) {
		body, _ := json.Marshal(review{Request: &request{UID: "uid-" + fleet, Name: fleet, Namespace: ns, Status: st}})
		code, b := post(t, c, wh.Port, path, body)
		var r review
		_ = json.Unmarshal(b, &r)
		return code, r, string(b)
	}
	st := fleetStatus{Replicas: 6, ReadyReplicas: 1, AllocatedReplicas: 2}
	var code int
	var r review
	var raw string
	if !harness.Poll(20*time.Second, 200*time.Millisecond, func() bool {
		code, r, raw = ask("/autoscale/buffer/bufferSize=2/maxReplicas=100", st, "gated")
		return code == 200 && r.Response != nil && r.Response.Replicas == 7
	}) {
		t.Fatalf("want 200 with replicas 7 ((2 allocated + 3 Allocating) + 2), got %d %s", code, raw)
	}
	if !r.Response.Scale || r.Response.UID != "uid-gated" {
		t.Fatalf("answer %s", raw)
	}
	// Percentage, written with '%' in service.path (Go sends %25): ceil(5 / 0.8) = 7.
	if code, r, raw = ask("/autoscale/buffer/bufferSize=20%/minReplicas=1/maxReplicas=100", st, "gated"); code != 200 || r.Response.Replicas != 7 {
		t.Fatalf("percentage: %d %s", code, raw)
	}
	// A query written into service.path: Go escapes '?' as %3F; still understood.
	if code, r, raw = ask("/autoscale/buffer?bufferSize=1&maxReplicas=5", st, "gated"); code != 200 || r.Response.Replicas != 5 || !r.Response.Scale {
		t.Fatalf("escaped query: %d %s", code, raw)
	}
	// One server resolves (Allocating -> Allocated): the count follows the watch.
	gs, err := dyn.Resource(harness.GameServerGVR).Namespace(ns).Get(ctx, "a1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gs.Object["status"] = map[string]interface{}{"state": "Allocated"}
	if _, err := dyn.Resource(harness.GameServerGVR).Namespace(ns).Update(ctx, gs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	st.AllocatedReplicas = 3
	if !harness.Poll(10*time.Second, 200*time.Millisecond, func() bool {
		code, r, raw = ask("/autoscale/buffer/bufferSize=2/maxReplicas=100", st, "gated")
		return code == 200 && r.Response.Replicas == 7 // 3 + 2 Allocating + 2
	}) {
		t.Fatalf("after promotion: %d %s", code, raw)
	}
	// Unknown fleet (replicas but no opted-in server): scale false, its status.replicas.
	if code, r, raw = ask("/autoscale/buffer/bufferSize=2/maxReplicas=100", fleetStatus{Replicas: 4}, "other"); code != 200 || r.Response.Scale || r.Response.Replicas != 4 {
		t.Fatalf("unknown fleet: %d %s", code, raw)
	}
	// Bad bodies and parameters: 400 with a message; the process keeps serving.
	for _, b := range []string{"", "{", `{"request":null}`, `{"request":{"uid":"u","name":"f","namespace":"n","status":{"replicas":1,"allocatedReplicas":-1}}}`} {
		if code, body := post(t, c, wh.Port, "/autoscale/buffer/bufferSize=2/maxReplicas=100", []byte(b)); code != 400 || len(body) < 10 {
			t.Fatalf("bad body %q: %d %s", b, code, body)
		}
	}
	if code, body := post(t, c, wh.Port, "/autoscale/buffer/bufferSize=0/maxReplicas=100", []byte(`{}`)); code != 400 || !strings.Contains(string(body), "bufferSize is 0") {
		t.Fatalf("bad parameters: %d %s", code, body)
	}
	m := wh.Metrics(t)
	if !strings.Contains(m, `allocating_webhook_autoscale_desired_replicas{fleet="gated",namespace="`+ns+`"} 7`) {
		t.Fatalf("desired replicas gauge missing:\n%s", m)
	}
}
