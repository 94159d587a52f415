// Package agonesreal runs the real Agones, built from its source (test/e2e/agonesreal/build-agones,
// AGONES_SRC), as local processes against the package's e2e control plane: agones-extensions
// (its admission webhooks, registered by URL), agones-controller, agones-allocator (mTLS, REST and
// gRPC on one port), and a fake node whose kubelet runs each game server pod as the real SDK
// sidecar and the real simple-game-server (kubelet.go). The tests (agones_test.go) run the
// project's webhook, resolver and gateway in front of it. docs/development.md, "The real Agones".
package agonesreal

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/agones-allocating-webhook/e2e/harness"
)

// Agones is one running Agones: its processes stop when the test that started it ends.
type Agones struct {
	BinDir  string // the built binaries (AW_AGONES_BIN)
	Src     string // the source tree (AGONES_SRC), for install/yaml/install.yaml
	Version string // as the binaries' directory is named
	Dir     string // logs, certificates, kubeconfigs
	Kubelet *Kubelet
	// The allocator (agones-allocator): REST and gRPC on one mTLS port.
	AllocatorAddr       string // 127.0.0.1:PORT
	AllocatorURL        string // https://127.0.0.1:PORT
	AllocatorCA         string // its serving CA
	ClientCert          string // a client certificate it accepts
	ClientKey           string
	ExtensionsPort      int
	MinPort, MaxPort    int
	cp                  *harness.ControlPlane
	procs               map[string]*exec.Cmd
	extensionsCA        string
	controllerKubecfg   string
	extensionsKubeconfg string
}

var seq atomic.Int64

// Options change how Agones is started.
type Options struct {
	// SidecarArgs are added to every SDK sidecar (e.g. "--request-rate-limit=500ms", the default).
	SidecarArgs []string
	// NoAllocator skips agones-allocator.
	NoAllocator bool
}

// BinDir is AW_AGONES_BIN (set by test/e2e/agonesreal/run after building).
func BinDir() string { return os.Getenv("AW_AGONES_BIN") }

// Start installs Agones' CRDs, RBAC and admission webhooks from AGONES_SRC's install.yaml and
// starts extensions, controller, allocator and the fake node's kubelet.
func Start(t *testing.T, cp *harness.ControlPlane, opts Options) *Agones {
	t.Helper()
	a := &Agones{BinDir: BinDir(), Src: os.Getenv("AGONES_SRC"), cp: cp, procs: map[string]*exec.Cmd{}}
	a.Version = filepath.Base(a.BinDir)
	a.Dir = filepath.Join(cp.Dir, "agones", fmt.Sprintf("%d", seq.Add(1)))
	if err := os.MkdirAll(a.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Game server host ports: a block of 100 of its own per process (packages may run together).
	a.MinPort = 20000 + (os.Getpid()%120)*100 // below the ephemeral range (32768-)
	a.MaxPort = a.MinPort + 99
	t.Cleanup(func() { a.stopAll(t) })

	docs := a.installDocs(t)
	cp.MustKubectl(t, harness.Admin, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: agones-system\n", "apply", "-f", "-")
	a.apply(t, "crds", docs, func(kind string) bool { return kind == "CustomResourceDefinition" })
	cp.MustKubectl(t, harness.Admin, "", "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
	a.apply(t, "rbac", docs, func(kind string) bool {
		return kind == "ClusterRole" || kind == "ClusterRoleBinding" || kind == "RoleBinding" || kind == "ServiceAccount"
	})

	a.controllerKubecfg = a.kubeconfig(t, "agones-controller", harness.AgonesController)
	// Extensions: the admission webhooks and the GameServerAllocation API's handler.
	ca := harness.NewTestCA(t, filepath.Join(a.Dir, "extensions-certs"), "agones-extensions-ca")
	crt, key := ca.Issue(t, "server", "agones-controller-service.agones-system.svc", true, "127.0.0.1", "localhost",
		"agones-controller-service.agones-system.svc")
	a.extensionsCA = ca.CAFile
	a.ExtensionsPort = harness.FreePort(t)
	// It reads its serving certificate from /certs/ whatever --cert-file says (pkg/util/https).
	a.spawnJailed(t, "extensions", nil, map[string]string{"/certs/server.crt": crt, "/certs/server.key": key},
		filepath.Join(a.BinDir, "extensions"),
		"--kubeconfig="+a.controllerKubecfg, "--cert-file="+crt, "--key-file="+key,
		fmt.Sprintf("--webhook-port=%d", a.ExtensionsPort), fmt.Sprintf("--http-port=%d", harness.FreePort(t)),
		"--prometheus-exporter=false", "--log-level=info")
	waitTLS(t, fmt.Sprintf("127.0.0.1:%d", a.ExtensionsPort), 60*time.Second, a)
	a.apply(t, "webhooks", docs, func(kind string) bool {
		return kind == "MutatingWebhookConfiguration" || kind == "ValidatingWebhookConfiguration"
	})

	// The fake node, before the controller (it reads nodes to address game servers).
	k, err := StartKubelet(harness.Ctx(t), cp.Clientset(t, harness.Admin), a.BinDir, filepath.Join(a.Dir, "pods"),
		freePort)
	if err != nil {
		t.Fatal(err)
	}
	k.SidecarArgs = opts.SidecarArgs
	a.Kubelet = k
	t.Cleanup(k.Stop)

	// The controller: Fleet, GameServerSet, GameServer, FleetAutoscaler controllers. Its health
	// server always listens on :8080 (not configurable); if that port is taken it only logs it.
	a.spawn(t, "controller", filepath.Join(a.BinDir, "controller"), nil,
		"--kubeconfig="+a.controllerKubecfg,
		fmt.Sprintf("--min-port=%d", a.MinPort), fmt.Sprintf("--max-port=%d", a.MaxPort),
		"--sidecar-image=agones-sdk:fake-kubelet", "--prometheus-exporter=false", "--log-level=info")

	if !opts.NoAllocator {
		a.startAllocator(t)
	}
	return a
}

// installDocs reads install/yaml/install.yaml of the source tree.
func (a *Agones) installDocs(t *testing.T) []map[string]interface{} {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(a.Src, "install", "yaml", "install.yaml"))
	if err != nil {
		t.Fatalf("AGONES_SRC: %v", err)
	}
	var out []map[string]interface{}
	for _, doc := range strings.Split(string(b), "\n---") {
		var m map[string]interface{}
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("install.yaml: %v", err)
		}
		if m != nil && m["kind"] != nil {
			out = append(out, m)
		}
	}
	return out
}

// apply applies the documents of the kinds keep selects, webhook configurations pointed at the
// local extensions by URL (their service is not reachable out of cluster).
func (a *Agones) apply(t *testing.T, name string, docs []map[string]interface{}, keep func(string) bool) {
	t.Helper()
	ca, err := os.ReadFile(a.extensionsCA)
	if (name == "webhooks" || name == "apiservice") && err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, d := range docs {
		kind, _ := d["kind"].(string)
		if !keep(kind) {
			continue
		}
		if kind == "APIService" {
			spec, _ := d["spec"].(map[string]interface{})
			spec["caBundle"] = base64.StdEncoding.EncodeToString(ca)
			delete(spec, "insecureSkipTLSVerify")
		}
		if whs, ok := d["webhooks"].([]interface{}); ok {
			for _, w := range whs {
				wm := w.(map[string]interface{})
				cc, _ := wm["clientConfig"].(map[string]interface{})
				svc, _ := cc["service"].(map[string]interface{})
				path, _ := svc["path"].(string)
				wm["clientConfig"] = map[string]interface{}{
					"url":      fmt.Sprintf("https://127.0.0.1:%d%s", a.ExtensionsPort, path),
					"caBundle": base64.StdEncoding.EncodeToString(ca),
				}
			}
		}
		b, err := yaml.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	if name == "crds" {
		// Not server-side apply: Agones 1.58+'s CRDs carry x-kubernetes-patch-* markers in their
		// embedded ObjectMeta/PodSpec schemas, which kube-apiserver's typed SSA of a CRD refuses
		// ("field not declared in schema"); not client-side apply either (the last-applied
		// annotation would pass the 256 KiB limit). Create, or replace what the harness installed.
		a.replaceCRDs(t, docs)
		return
	}
	file := filepath.Join(a.Dir, name+".yaml")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	a.cp.MustKubectl(t, harness.Admin, "", "apply", "--server-side", "--force-conflicts", "-f", file)
}

// kubeconfig writes a kubeconfig whose current context is identity.
func (a *Agones) kubeconfig(t *testing.T, name, identity string) string {
	t.Helper()
	ca, err := os.ReadFile(a.cp.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    certificate-authority-data: %s
current-context: c
contexts:
- name: c
  context:
    cluster: e2e
    user: u
users:
- name: u
  user:
    token: %s
`, a.cp.APIServerURL, base64.StdEncoding.EncodeToString(ca), a.cp.Token(t, identity))
	path := filepath.Join(a.Dir, name+".kubeconfig")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startAllocator runs agones-allocator with mTLS. It reads its serving certificate from
// /home/allocator/tls/, its client CAs from /home/allocator/client-ca/ and its API server from the
// in-cluster service-account files (rest.InClusterConfig): none of these paths can be changed, so
// it runs jailed (spawnJailed) with this run's files at those paths.
func (a *Agones) startAllocator(t *testing.T) {
	t.Helper()
	dir := filepath.Join(a.Dir, "allocator")
	serving := harness.NewTestCA(t, filepath.Join(dir, "serving"), "agones-allocator-ca")
	serving.Issue(t, "tls", "agones-allocator", true, "127.0.0.1", "localhost")
	clients := harness.NewTestCA(t, filepath.Join(dir, "client-ca"), "allocator-client-ca")
	a.ClientCert, a.ClientKey = clients.Issue(t, "client", "allocation-gateway", false)
	// Only the CA in client-ca/ (the allocator trusts every *.crt there).
	clientDir := filepath.Join(dir, "client-ca-only")
	_ = os.MkdirAll(clientDir, 0o755)
	copyFile(t, clients.CAFile, filepath.Join(clientDir, "ca.crt"))
	saDir := filepath.Join(dir, "serviceaccount")
	_ = os.MkdirAll(saDir, 0o755)
	if err := os.WriteFile(filepath.Join(saDir, "token"), []byte(a.cp.Token(t, harness.AgonesAllocator)), 0o600); err != nil {
		t.Fatal(err)
	}
	copyFile(t, a.cp.CAFile, filepath.Join(saDir, "ca.crt"))
	if err := os.WriteFile(filepath.Join(saDir, "namespace"), []byte("agones-system"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.AllocatorCA = serving.CAFile
	port := harness.FreePort(t)
	a.AllocatorAddr = fmt.Sprintf("127.0.0.1:%d", port)
	a.AllocatorURL = "https://" + a.AllocatorAddr
	u, err := urlHostPort(a.cp.APIServerURL)
	if err != nil {
		t.Fatal(err)
	}
	host, apiPort, _ := net.SplitHostPort(u)
	sa := "/var/run/secrets/kubernetes.io/serviceaccount/"
	a.spawnJailed(t, "allocator", []string{"KUBERNETES_SERVICE_HOST=" + host, "KUBERNETES_SERVICE_PORT=" + apiPort},
		map[string]string{
			"/home/allocator/tls/tls.crt":      filepath.Join(dir, "serving", "tls.crt"),
			"/home/allocator/tls/tls.key":      filepath.Join(dir, "serving", "tls.key"),
			"/home/allocator/client-ca/ca.crt": filepath.Join(clientDir, "ca.crt"),
			sa + "token":                       filepath.Join(saDir, "token"),
			sa + "ca.crt":                      filepath.Join(saDir, "ca.crt"),
			sa + "namespace":                   filepath.Join(saDir, "namespace"),
		},
		filepath.Join(a.BinDir, "allocator"),
		fmt.Sprintf("--http-port=%d", port), fmt.Sprintf("--grpc-port=%d", port),
		"--prometheus-exporter=false", "--log-level=info")
	waitTLS(t, a.AllocatorAddr, 60*time.Second, a)
}

func urlHostPort(u string) (string, error) {
	s := strings.TrimPrefix(u, "https://")
	s = strings.TrimSuffix(s, "/")
	if _, _, err := net.SplitHostPort(s); err != nil {
		return "", fmt.Errorf("API server URL %q: %v", u, err)
	}
	return s, nil
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitTLS waits until addr accepts a TCP connection and completes a TLS handshake far enough to
// answer (any certificate).
func waitTLS(t *testing.T, addr string, timeout time.Duration, a *Agones) {
	t.Helper()
	ok := harness.Poll(timeout, 200*time.Millisecond, func() bool {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // readiness only
		if err != nil {
			// An mTLS server may refuse the handshake without a client certificate: listening is enough.
			if nc, derr := net.DialTimeout("tcp", addr, time.Second); derr == nil {
				nc.Close()
				return true
			}
			return false
		}
		c.Close()
		return true
	})
	if !ok {
		a.dumpLogs(t)
		t.Fatalf("%s not listening after %s", addr, timeout)
	}
}

// spawn starts a process whose output goes to Dir/<name>.log; it is killed when the test ends
// (and when the test binary dies: Pdeathsig).
func (a *Agones) spawn(t *testing.T, name, bin string, env []string, args ...string) {
	t.Helper()
	logPath := filepath.Join(a.Dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	a.procs[name] = cmd
	go func() { _ = cmd.Wait() }()
}

// Stop kills one of the processes (extensions, controller, allocator).
func (a *Agones) Stop(name string) {
	if c := a.procs[name]; c != nil && c.Process != nil {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		delete(a.procs, name)
	}
}

// Running reports whether process name still runs.
func (a *Agones) Running(name string) bool {
	c := a.procs[name]
	return c != nil && c.ProcessState == nil && c.Process.Signal(syscall.Signal(0)) == nil
}

func (a *Agones) stopAll(t *testing.T) {
	if t.Failed() {
		a.dumpLogs(t)
	}
	for name := range a.procs {
		a.Stop(name)
	}
	// Agones' webhook configurations point at this run's extensions: remove them with it, so later
	// tests of the package (and namespace deletion) do not call a dead URL.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs := a.cp.Clientset(t, harness.Admin)
	_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, "agones-mutation-webhook", metav1.DeleteOptions{})
	_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, "zzz-agones-mutation-webhook", metav1.DeleteOptions{})
	_ = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "agones-validation-webhook", metav1.DeleteOptions{})
}

// dumpLogs prints the tail of every Agones process log and of the kubelet's pod logs.
func (a *Agones) dumpLogs(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(a.Dir, "*.log"))
	pods, _ := filepath.Glob(filepath.Join(a.Dir, "pods", "*.log"))
	for _, f := range append(files, pods...) {
		t.Logf("---- %s (tail)\n%s", f, tail(f, 25))
	}
	if a.Kubelet != nil {
		for _, e := range a.Kubelet.Errors() {
			t.Logf("kubelet: %s", e)
		}
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// replaceCRDs creates each CustomResourceDefinition of docs, or updates the one installed.
func (a *Agones) replaceCRDs(t *testing.T, docs []map[string]interface{}) {
	t.Helper()
	// Without client-go's warning log: kube-apiserver warns about every x-kubernetes-patch-*
	// marker it drops (the CRD schema has no such fields), hundreds of lines per CRD.
	cfg := rest.CopyConfig(a.cp.RESTConfig(t, harness.Admin))
	cfg.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	crds := dyn.Resource(harness.CRDGVR)
	ctx := harness.Ctx(t)
	for _, d := range docs {
		if d["kind"] != "CustomResourceDefinition" {
			continue
		}
		u := &unstructured.Unstructured{Object: d}
		cur, err := crds.Get(ctx, u.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if _, err := crds.Create(ctx, u, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create CRD %s: %v", u.GetName(), err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		u.SetResourceVersion(cur.GetResourceVersion())
		if _, err := crds.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("replace CRD %s: %v", u.GetName(), err)
		}
	}
}

// jailScript builds a root of its own on a tmpfs at $1 (in the private mount namespace unshare
// made: nothing outside it changes): /dev and /proc, the directories named bind=DIR at the same
// paths, the files DEST=SRC copied in; then chroot there and exec the command after "--". The
// Agones binaries are static Go programs: they need nothing else from the host.
const jailScript = `set -e
R="$1"; shift
mount -t tmpfs tmpfs "$R"
for d in /dev /proc; do mkdir -p "$R$d"; mount --rbind "$d" "$R$d"; done
mkdir -p "$R/tmp"
while [ "$1" != "--" ]; do
  case "$1" in
    bind=*) p=${1#bind=}; mkdir -p "$R$p"; mount --rbind "$p" "$R$p" ;;
    *) dest=${1%%=*}; src=${1#*=}; mkdir -p "$R$(dirname "$dest")"; cp "$src" "$R$dest" ;;
  esac
  shift
done
shift
exec chroot "$R" "$@"`

// spawnJailed runs bin with files (path inside -> host file) at fixed paths, in a private mount
// namespace (unshare -m as root; unshare -r -m, a user namespace of its own, otherwise) whose
// root is a tmpfs holding them, this run's directory and the binaries' (at their own paths).
func (a *Agones) spawnJailed(t *testing.T, name string, env []string, files map[string]string, bin string, args ...string) {
	t.Helper()
	// Outside a.Dir, which is bound inside it.
	root := filepath.Join(a.cp.Dir, "agones-roots", filepath.Base(a.Dir)+"-"+name)
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	unshare := []string{"-m", "--propagation", "private"}
	if os.Geteuid() != 0 {
		unshare = []string{"-r", "-m", "--propagation", "private"}
	}
	cmd := append(unshare, "/bin/sh", "-c", jailScript, "sh", root, "bind="+a.Dir, "bind="+a.BinDir)
	for dest, src := range files {
		cmd = append(cmd, dest+"="+src)
	}
	cmd = append(append(cmd, "--", bin), args...)
	a.spawn(t, name, "unshare", env, cmd...)
}

// ServeAllocationAPI registers the GameServerAllocation API (the aggregated v1.allocation.agones.dev,
// served by extensions) as install.yaml does, with the Service agones-controller-service given
// the endpoint hostIP:ExtensionsPort by hand (no endpoints controller here; kube-apiserver refuses
// loopback endpoints, so hostIP is one of this host's other addresses). kube-apiserver must route
// to endpoints (--enable-aggregator-routing=true: there is no kube-proxy for the ClusterIP).
func (a *Agones) ServeAllocationAPI(t *testing.T, hostIP string) {
	t.Helper()
	svc := fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: agones-controller-service, namespace: agones-system}
spec:
  ports: [{port: 443, targetPort: %[1]d, protocol: TCP}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: agones-controller-service, namespace: agones-system}
subsets: [{addresses: [{ip: %[2]s}], ports: [{port: %[1]d, protocol: TCP}]}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: agones-controller-service-manual
  namespace: agones-system
  labels: {kubernetes.io/service-name: agones-controller-service}
addressType: IPv4
endpoints: [{addresses: [%[2]s], conditions: {ready: true}}]
ports: [{port: %[1]d, protocol: TCP}]
`, a.ExtensionsPort, hostIP)
	a.cp.MustKubectl(t, harness.Admin, svc, "apply", "-f", "-")
	a.apply(t, "apiservice", a.installDocs(t), func(kind string) bool { return kind == "APIService" })
	var last string
	if !harness.Poll(60*time.Second, 250*time.Millisecond, func() bool {
		out, _, _ := a.cp.Kubectl(harness.Admin, "", "get", "apiservice", "v1.allocation.agones.dev",
			"-o", `jsonpath={.status.conditions[?(@.type=="Available")].status} {.status.conditions[?(@.type=="Available")].message}`)
		last = out
		return strings.HasPrefix(out, "True")
	}) {
		t.Fatalf("APIService v1.allocation.agones.dev not Available: %s", last)
	}
	t.Cleanup(func() {
		_, _, _ = a.cp.Kubectl(harness.Admin, "", "delete", "apiservice", "v1.allocation.agones.dev", "--ignore-not-found")
	})
}

// HostIP is a non-loopback IPv4 address of this host ("" if none).
func HostIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, ad := range addrs {
		if n, ok := ad.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// freePort is a TCP port of 127.0.0.1 free a moment ago (0 if none: the process then fails to
// listen and the test sees it); unlike harness.FreePort it may run off the test's goroutine.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
