// Package helm installs charts/allocating-webhook with `helm install` on this package's real
// kube-apiserver and plays the README's flow against it: the chart's webhook configurations (called
// by URL, caBundle from the certificate the chart generated), the chart's RBAC (the webhook runs as
// the chart's service account) and the chart's Deployment arguments (the local webhook process is
// started with exactly those flags, only the paths, ports and kubeconfig changed). There is no
// kubelet: the Deployment's pods never run, the binary runs on 127.0.0.1 as in the other packages.
// With gateway.enabled the same holds for allocation-gateway (gateway_test.go): its Deployment's
// arguments, its generated certificate and its RBAC, in front of the stand-in agones-allocator.
package helm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agones-allocating-webhook/e2e/harness"
	"github.com/agones-allocating-webhook/e2e/standin"
)

func TestMain(m *testing.M) { harness.Main(m) }

const (
	release   = "aw"
	namespace = "allocating-system"
	name      = "allocating-webhook"
)

type env struct {
	cp    *harness.ControlPlane
	helm  string
	chart string
	home  string
}

func setup(t *testing.T) env {
	t.Helper()
	cp := harness.Setup(t)
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "charts", "hack", "build-helm")).Output()
	if err != nil {
		t.Fatalf("charts/hack/build-helm: %v", err)
	}
	e := env{cp: cp, helm: strings.TrimSpace(string(out)), chart: filepath.Join(root, "charts", "allocating-webhook"), home: t.TempDir()}
	// The control plane gave the resolver identity manifests/overlays/local's RBAC; the chart owns
	// those names, so they go and the chart's own objects take their place.
	cp.MustKubectl(t, harness.Admin, "", "delete", "--ignore-not-found", "clusterrole/"+name, "clusterrolebinding/"+name)
	cp.MustKubectl(t, harness.Admin, "", "-n", namespace, "delete", "--ignore-not-found",
		"role/"+name+"-leader-election", "rolebinding/"+name+"-leader-election", "serviceaccount/"+name)
	return e
}

// run runs helm against the control plane as admin, with its state in a temporary home.
func (e env) run(t *testing.T, args ...string) string {
	t.Helper()
	full := append([]string{"--kubeconfig", e.cp.Kubeconfig, "--kube-context", harness.Admin, "--namespace", namespace}, args...)
	cmd := exec.Command(e.helm, full...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+e.home+"/cache", "HELM_CONFIG_HOME="+e.home+"/config",
		"HELM_DATA_HOME="+e.home+"/data")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (e env) getJSON(t *testing.T, args ...string) map[string]interface{} {
	t.Helper()
	out := e.cp.MustKubectl(t, harness.Admin, "", append(args, "-o", "json")...)
	var m map[string]interface{}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("kubectl get %v: %v", args, err)
	}
	return m
}

// secret returns the chart's TLS Secret's data (decoded).
func (e env) secret(t *testing.T) map[string][]byte {
	t.Helper()
	s, err := e.cp.Clientset(t, harness.Admin).CoreV1().Secrets(namespace).Get(context.Background(), name+"-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("chart Secret: %v", err)
	}
	return s.Data
}

// caBundles returns every webhook's caBundle (decoded) of both configurations.
func (e env) caBundles(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, kind := range []string{"mutatingwebhookconfiguration", "validatingwebhookconfiguration"} {
		cfg := e.getJSON(t, "get", kind, name)
		hooks, _, _ := unstructured.NestedSlice(cfg, "webhooks")
		for _, h := range hooks {
			b, _, _ := unstructured.NestedString(h.(map[string]interface{}), "clientConfig", "caBundle")
			pem, err := base64.StdEncoding.DecodeString(b)
			if err != nil {
				t.Fatalf("%s caBundle: %v", kind, err)
			}
			out = append(out, string(pem))
		}
	}
	return out
}

// deploymentArgs returns the installed Deployment's container arguments.
func (e env) deploymentArgs(t *testing.T) []string {
	t.Helper()
	d, err := e.cp.Clientset(t, harness.Admin).AppsV1().Deployments(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("chart Deployment: %v", err)
	}
	return d.Spec.Template.Spec.Containers[0].Args
}

// startFromChart starts the webhook with the Deployment's arguments and the Secret's certificate;
// the harness supplies the listen address, ports and certificate paths, and the kubeconfig names
// the chart's service account (the resolver identity).
func (e env) startFromChart(t *testing.T, port int) *harness.Webhook {
	t.Helper()
	dir := t.TempDir()
	for k, v := range e.secret(t) {
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var args []string
	for _, a := range e.deploymentArgs(t) {
		flag := strings.SplitN(strings.TrimPrefix(a, "--"), "=", 2)[0]
		switch flag {
		case "port", "health-port", "tls-cert-file", "tls-key-file", "bind-address":
			continue
		}
		args = append(args, a)
	}
	args = append(args, "--kubeconfig="+e.cp.Kubeconfig, "--context="+harness.Resolver)
	return e.cp.StartWebhook(t, harness.WebhookOptions{Name: "chart", Port: port, CertDir: dir, Args: args, Wait: "readyz"})
}

func TestHelmInstallGatesAndConfirms(t *testing.T) {
	e := setup(t)
	cp := e.cp
	port := harness.FreePort(t)
	e.run(t, "install", release, e.chart, "--set", "webhooks.url=https://127.0.0.1:"+itoa(port), "--set", "certs.extraIPs={127.0.0.1}")
	t.Cleanup(func() {
		e.run(t, "uninstall", release)
	})
	// The objects exist (no kubelet: the Deployment's pods never start, so wait for the objects).
	cp.MustKubectl(t, harness.Admin, "", "-n", namespace, "wait", "--for=create", "--timeout=30s",
		"deployment/"+name, "secret/"+name+"-tls", "service/"+name, "poddisruptionbudget/"+name)
	cp.MustKubectl(t, harness.Admin, "", "wait", "--for=create", "--timeout=30s",
		"mutatingwebhookconfiguration/"+name, "validatingwebhookconfiguration/"+name)

	// The generated CA is in every webhook's caBundle.
	sec := e.secret(t)
	bundles := e.caBundles(t)
	if len(bundles) != 5 {
		t.Fatalf("want 5 webhooks, got %d", len(bundles))
	}
	for i, b := range bundles {
		if b != string(sec["ca.crt"]) {
			t.Fatalf("webhook %d caBundle is not the Secret's ca.crt", i)
		}
	}

	// The webhook runs with the chart's flags; as leader it adds Allocating to the CRD (chart
	// RBAC: patch on that CRD) and opens the gate.
	wh := e.startFromChart(t, port)
	if !harness.Poll(30*time.Second, 100*time.Millisecond, func() bool {
		return harness.MetricValue(wh.Metrics(t), "allocating_webhook_crd_accepts_allocating") == "1"
	}) {
		t.Fatalf("the chart's webhook never saw Allocating in the CRD (leader, CRD guard); log:\n%s", wh.LogTail(40))
	}
	cp.WaitWebhookCalled(t, 20*time.Second)

	ns := cp.Namespace(t)
	sdk := cp.SDK(t, ns)
	s, err := standin.Listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.SetLoaded(true); err != nil {
		t.Fatal(err)
	}
	gs := harness.NewGameServer("gs1", true)
	_ = unstructured.SetNestedSlice(gs.Object, standin.SpecPorts(), "spec", "ports")
	dyn := cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(ns)
	created, err := dyn.Create(harness.Ctx(t), gs, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	_ = unstructured.SetNestedField(created.Object, "Ready", "status", "state")
	_ = unstructured.SetNestedField(created.Object, "127.0.0.1", "status", "address")
	_ = unstructured.SetNestedSlice(created.Object, s.Ports(), "status", "ports")
	if _, err := dyn.Update(harness.Ctx(t), created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("Ready: %v", err)
	}

	// Gated: the allocator's UPDATE to Allocated is answered with Allocating.
	got, err := harness.AllocateLikeAgones(harness.Ctx(t), cp.Dynamic(t, harness.AgonesController), ns, "gs1", nil, nil)
	if err != nil {
		t.Fatalf("allocate: %v", err)
	}
	if harness.State(got) != "Allocating" {
		t.Fatalf("allocation not gated by the chart's webhook: %s", harness.Describe(got))
	}
	// Confirmed: the game server's SetAnnotation("allocating-ready", id) plus the probe.
	if _, err := standin.ConfirmReady(harness.Ctx(t), sdk.Dyn, ns, "gs1"); err != nil {
		t.Fatalf("confirm: %v", err)
	}
	cp.MustKubectl(t, harness.Admin, "", "-n", ns, "wait", "--for=jsonpath={.status.state}=Allocated", "--timeout=30s", "gameserver/gs1")
	final := cp.GetGameServer(t, ns, "gs1")
	if o := harness.Annotation(final, harness.OutcomeKey); o != "Confirmed" {
		t.Fatalf("outcome %q, want Confirmed: %s", o, harness.Describe(final))
	}

	// Denied by the validating webhook: an invalid timeout annotation on an opted-in GameServer.
	bad := harness.NewGameServer("gs-bad", true, harness.TimeoutKey, "soon")
	_, err = dyn.Create(harness.Ctx(t), bad, metav1.CreateOptions{})
	if err == nil || !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) && !strings.Contains(err.Error(), "denied") {
		t.Fatalf("create with %s=soon: want a denial from the validating webhook, got %v", harness.TimeoutKey, err)
	}
	if !strings.Contains(err.Error(), harness.TimeoutKey) {
		t.Fatalf("denial does not name %s: %v", harness.TimeoutKey, err)
	}

	// helm upgrade keeps the generated certificate (lookup) and applies changed values.
	e.run(t, "upgrade", release, e.chart, "--reuse-values", "--set", "flags.default-timeout=45s")
	after := e.secret(t)
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if string(after[k]) != string(sec[k]) {
			t.Fatalf("helm upgrade rotated %s of the generated Secret", k)
		}
	}
	for i, b := range e.caBundles(t) {
		if b != string(sec["ca.crt"]) {
			t.Fatalf("after upgrade, webhook %d caBundle changed", i)
		}
	}
	if !contains(e.deploymentArgs(t), "--default-timeout=45s") {
		t.Fatalf("helm upgrade did not change the Deployment's args: %v", e.deploymentArgs(t))
	}
}

// failurePolicy is a value: with Fail and no webhook answering, a write to an opted-in
// GameServer is refused by kube-apiserver; then helm uninstall removes both configurations.
func TestHelmFailurePolicyFailAndUninstall(t *testing.T) {
	e := setup(t)
	cp := e.cp
	port := harness.FreePort(t) // nothing listens there
	e.run(t, "install", release, e.chart, "--set", "webhooks.url=https://127.0.0.1:"+itoa(port),
		"--set", "webhooks.failurePolicy=Fail", "--set", "webhooks.timeoutSeconds=2")
	installed := true
	t.Cleanup(func() {
		if installed {
			e.run(t, "uninstall", release)
		}
	})
	ns := cp.Namespace(t)
	dyn := cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(ns)
	var err error
	harness.Poll(20*time.Second, 200*time.Millisecond, func() bool {
		_, err = dyn.Create(harness.Ctx(t), harness.NewGameServer("gs-fail", true), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "failed calling webhook")
	})
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("failurePolicy Fail with no webhook: want 'failed calling webhook', got %v", err)
	}
	// Not opted in: never sent to the webhook (objectSelector), so it is admitted.
	if _, err := dyn.Create(harness.Ctx(t), harness.NewGameServer("gs-plain", false), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("GameServer without the opt-in label refused: %v", err)
	}
	e.run(t, "uninstall", release)
	installed = false
	for _, kind := range []string{"mutatingwebhookconfiguration", "validatingwebhookconfiguration", "clusterrole"} {
		out := cp.MustKubectl(t, harness.Admin, "", "get", kind, name, "--ignore-not-found", "-o", "name")
		if strings.TrimSpace(out) != "" {
			t.Fatalf("helm uninstall left %s", out)
		}
	}
	if _, err := dyn.Create(harness.Ctx(t), harness.NewGameServer("gs-after", true), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("after uninstall an opted-in GameServer is still refused: %v", err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func itoa(i int) string { return strconv.Itoa(i) }
