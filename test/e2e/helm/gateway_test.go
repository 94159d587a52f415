package helm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agones-allocating-webhook/e2e/harness"
	"github.com/agones-allocating-webhook/e2e/standin"
)

const gateway = "allocation-gateway"

// writeSecret writes the data of Secret NAME (release namespace) into DIR, one file per key.
func (e env) writeSecret(t *testing.T, secret, dir string) {
	t.Helper()
	s, err := e.cp.Clientset(t, harness.Admin).CoreV1().Secrets(namespace).Get(context.Background(), secret, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Secret %s: %v", secret, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for k, v := range s.Data {
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// gatewayKubeconfig returns a kubeconfig whose user is the chart's gateway service account (a
// TokenRequest token), so the process has exactly the chart's gateway RBAC.
func (e env) gatewayKubeconfig(t *testing.T) string {
	t.Helper()
	token := strings.TrimSpace(e.cp.MustKubectl(t, harness.Admin, "", "-n", namespace, "create", "token", gateway, "--duration=1h"))
	server := e.cp.MustKubectl(t, harness.Admin, "", "config", "view", "--raw", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}")
	ca := e.cp.MustKubectl(t, harness.Admin, "", "config", "view", "--raw", "--minify", "-o", "jsonpath={.clusters[0].cluster.certificate-authority-data}")
	path := filepath.Join(t.TempDir(), "gateway.kubeconfig")
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: %q, certificate-authority-data: %q}}]\n"+
		"users: [{name: gw, user: {token: %q}}]\ncontexts: [{name: gw, context: {cluster: c, user: gw}}]\ncurrent-context: gw\n",
		strings.TrimSpace(server), strings.TrimSpace(ca), token)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The chart with gateway.enabled: its gateway Deployment's arguments, its generated serving
// certificate and its RBAC (as the gateway's own service account) run allocation-gateway in front
// of the stand-in agones-allocator; a matchmaker's allocation through it is answered only once the
// GameServer is confirmed, and a client without a certificate is refused.
func TestHelmGateway(t *testing.T) {
	e := setup(t)
	cp := e.cp
	alloc := cp.StartAllocatorStandin(t)
	clientCA := harness.NewTestCA(t, filepath.Join(t.TempDir(), "clients"), "matchmaker-ca")

	// The two Secrets the admin provides (manifests/components/gateway/README.md).
	cp.MustKubectl(t, harness.Admin, "", "-n", namespace, "create", "secret", "generic", gateway+"-client-ca",
		"--from-file=ca.crt="+clientCA.CAFile)
	cp.MustKubectl(t, harness.Admin, "", "-n", namespace, "create", "secret", "generic", gateway+"-allocator-client",
		"--from-file=tls.crt="+alloc.ClientCert, "--from-file=tls.key="+alloc.ClientKey, "--from-file=ca.crt="+alloc.CAFile)
	t.Cleanup(func() {
		cp.MustKubectl(t, harness.Admin, "", "-n", namespace, "delete", "secret", "--ignore-not-found",
			gateway+"-client-ca", gateway+"-allocator-client")
	})

	port := harness.FreePort(t)
	e.run(t, "install", release, e.chart, "--set", "webhooks.url=https://127.0.0.1:"+itoa(port), "--set", "certs.extraIPs={127.0.0.1}",
		"--set", "gateway.enabled=true", "--set", "gateway.certs.extraIPs={127.0.0.1}",
		"--set", "gateway.allocator.address="+alloc.URL, "--set", "gateway.flags.deadline=20s")
	t.Cleanup(func() { e.run(t, "uninstall", release) })
	cp.MustKubectl(t, harness.Admin, "", "-n", namespace, "wait", "--for=create", "--timeout=30s",
		"deployment/"+gateway, "secret/"+gateway+"-tls", "service/"+gateway, "serviceaccount/"+gateway)

	// The webhook and resolver from the chart, as in TestHelmInstallGatesAndConfirms.
	wh := e.startFromChart(t, port)
	if !harness.Poll(30*time.Second, 100*time.Millisecond, func() bool {
		return harness.MetricValue(wh.Metrics(t), "allocating_webhook_crd_accepts_allocating") == "1"
	}) {
		t.Fatalf("the chart's webhook never saw Allocating in the CRD; log:\n%s", wh.LogTail(40))
	}
	cp.WaitWebhookCalled(t, 20*time.Second)

	// The gateway with its Deployment's arguments: /etc/allocation-gateway/<volume>/ becomes a
	// directory holding that volume's Secret; the harness supplies only the loopback ports.
	d, err := cp.Clientset(t, harness.Admin).AppsV1().Deployments(namespace).Get(context.Background(), gateway, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	root := t.TempDir()
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			e.writeSecret(t, v.Secret.SecretName, filepath.Join(root, v.Name))
		}
	}
	mounts := map[string]string{}
	for _, m := range pod.Containers[0].VolumeMounts {
		mounts[m.MountPath] = filepath.Join(root, m.Name)
	}
	if cmd := pod.Containers[0].Command; len(cmd) != 1 || cmd[0] != "/usr/local/bin/allocation-gateway" {
		t.Fatalf("gateway command %v", cmd)
	}
	var args []string
	for _, a := range pod.Containers[0].Args {
		flag := strings.SplitN(strings.TrimPrefix(a, "--"), "=", 2)[0]
		switch flag {
		case "port", "health-port", "bind-address":
			continue
		}
		if i := strings.Index(a, "="); i > 0 {
			for mp, dir := range mounts {
				if v := a[i+1:]; v == mp || strings.HasPrefix(v, mp+"/") {
					a = a[:i+1] + dir + a[i+1+len(mp):]
					break
				}
			}
		}
		args = append(args, a)
	}
	args = append(args, "--kubeconfig="+e.gatewayKubeconfig(t))
	gw := cp.StartWebhook(t, harness.WebhookOptions{
		Name: "chart-gateway", Binary: harness.GatewayBinary(), Args: args, Wait: "readyz",
		CertDir:    filepath.Join(root, "tls"),
		NoDefaults: []string{"trusted-users", "agones-controller-users"},
	})
	if strings.Contains(strings.ToLower(gw.LogTail(200)), "forbidden") {
		t.Fatalf("the gateway met a forbidden request with the chart's RBAC:\n%s", gw.LogTail(40))
	}

	// A matchmaker with a client certificate from the CA in the client-ca Secret; the gateway's
	// serving certificate is the chart-generated one (verified against its ca.crt).
	crt, key := clientCA.Issue(t, "director", "director", false)
	client := harness.HTTPSClient(t, filepath.Join(root, "tls", "ca.crt"), crt, key)

	ns := cp.Namespace(t)
	sdk := cp.SDK(t, ns)
	dyn := cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(ns)
	created, err := dyn.Create(harness.Ctx(t), harness.NewGameServer("gs-gw", true, harness.TimeoutKey, "20s"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(created.Object, "Ready", "status", "state")
	_ = unstructured.SetNestedField(created.Object, "127.0.0.1", "status", "address")
	_ = unstructured.SetNestedSlice(created.Object, []interface{}{map[string]interface{}{"name": "default", "port": int64(7654)}}, "status", "ports")
	if _, err := dyn.Update(harness.Ctx(t), created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	type result struct {
		status int
		body   map[string]interface{}
		raw    string
		err    error
	}
	post := func(c *http.Client) result {
		res, err := c.Post(gw.URL("/gameserverallocation"), "application/json", bytes.NewBufferString(fmt.Sprintf(`{"namespace":%q}`, ns)))
		if err != nil {
			return result{err: err}
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		r := result{status: res.StatusCode, raw: string(raw)}
		_ = json.Unmarshal(raw, &r.body)
		return r
	}
	ch := make(chan result, 1)
	go func() { ch <- post(client) }()
	if !harness.Poll(10*time.Second, 20*time.Millisecond, func() bool {
		return harness.State(cp.GetGameServer(t, ns, "gs-gw")) == "Allocating"
	}) {
		t.Fatalf("gs-gw never Allocating: %s", harness.Describe(cp.GetGameServer(t, ns, "gs-gw")))
	}
	select {
	case r := <-ch:
		t.Fatalf("answered before the server was confirmed: %d %s %v", r.status, r.raw, r.err)
	case <-time.After(time.Second):
	}
	id, err := standin.ConfirmReady(harness.Ctx(t), sdk.Dyn, ns, "gs-gw")
	if err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-ch:
	case <-time.After(15 * time.Second):
		t.Fatalf("no answer 15s after the confirmation; gateway log:\n%s", gw.LogTail(40))
	}
	if r.err != nil || r.status != 200 || r.body["gameServerName"] != "gs-gw" {
		t.Fatalf("want 200 for gs-gw, got %d %s %v", r.status, r.raw, r.err)
	}
	md, _ := r.body["metadata"].(map[string]interface{})
	ann, _ := md["annotations"].(map[string]interface{})
	if ann[harness.ConfirmedKey] != id {
		t.Fatalf("response metadata lacks %s=%s: %s", harness.ConfirmedKey, id, r.raw)
	}
	if s := harness.State(cp.GetGameServer(t, ns, "gs-gw")); s != "Allocated" {
		t.Fatalf("answered while the server is %s", s)
	}

	// No client certificate: refused at the handshake.
	if r := post(harness.HTTPSClient(t, filepath.Join(root, "tls", "ca.crt"), "", "")); r.err == nil {
		t.Fatalf("a client without a certificate got HTTP %d %s", r.status, r.raw)
	}
}
