package harness

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ControlPlane is one running etcd + kube-apiserver (scripts/controlplane) and its state directory.
type ControlPlane struct {
	Dir          string // state directory (AW_E2E_DIR of scripts/controlplane)
	Kubeconfig   string // Dir/kubeconfig: one context per identity, admin is the default
	KubectlPath  string // the kubectl built with the control plane
	APIServerURL string // https://127.0.0.1:PORT
	CAFile       string // CA of the API server's serving certificate
	TokenFile    string // the --token-auth-file (CSV)
	owned        bool   // started by this process (Main): stopped at the end

	mu sync.Mutex // serialises API server stop/start
}

var (
	shared    *ControlPlane
	sharedErr error
)

// Main is a test package's TestMain body: it brings up a control plane for the package, runs the
// tests, tears the control plane down (when it started it) and exits with the tests' status.
//
// The state directory is, in order: AW_E2E_DIR when set and a control plane is already up there
// (joined, never stopped: e.g. the one of scripts/up); else $AW_E2E_ROOT/<package dir under test/e2e>
// (AW_E2E_ROOT defaults to <root>/build/e2e-go), started here. So every test package gets its own
// control plane (cluster-scoped state such as the CRD enum or the webhook configurations never leaks
// between packages) and packages can run in parallel.
func Main(m *testing.M) {
	code := 1
	func() {
		defer func() {
			if r := recover(); r != nil {
				fmt.Fprintf(os.Stderr, "harness: %v\n", r)
			}
		}()
		shared, sharedErr = bringUp()
		if sharedErr != nil {
			fmt.Fprintf(os.Stderr, "harness: control plane: %v\n", sharedErr)
			return
		}
		code = m.Run()
	}()
	if shared != nil && shared.owned {
		if out, err := runScript(shared.Dir, nil, "down"); err != nil {
			fmt.Fprintf(os.Stderr, "harness: controlplane down: %v\n%s", err, out)
		}
	}
	os.Exit(code)
}

func bringUp() (*ControlPlane, error) {
	if d := os.Getenv("AW_E2E_DIR"); d != "" {
		if _, err := runScript(d, nil, "status"); err == nil {
			return load(d, false)
		}
	}
	root := os.Getenv("AW_E2E_ROOT")
	if root == "" {
		root = filepath.Join(mustRoot(), "build", "e2e-go")
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	// The package's directory relative to test/e2e names its control plane (unique per package).
	name := filepath.Base(wd)
	if rel, err := filepath.Rel(filepath.Join(mustRoot(), "test", "e2e"), wd); err == nil && !strings.HasPrefix(rel, "..") {
		name = strings.ReplaceAll(rel, string(filepath.Separator), "_")
	}
	dir := filepath.Join(root, name)
	if out, err := runScript(dir, nil, "up"); err != nil {
		return nil, fmt.Errorf("scripts/controlplane up: %v\n%s", err, out)
	}
	return load(dir, true)
}

func load(dir string, owned bool) (*ControlPlane, error) {
	env, err := ReadEnvFile(filepath.Join(dir, "state.env"))
	if err != nil {
		return nil, err
	}
	return &ControlPlane{
		Dir:          dir,
		Kubeconfig:   env["KUBECONFIG"],
		KubectlPath:  env["KUBECTL"],
		APIServerURL: env["APISERVER_URL"],
		CAFile:       env["CA_FILE"],
		TokenFile:    env["TOKEN_FILE"],
		owned:        owned,
	}, nil
}

// Attach returns the control plane that scripts/controlplane brought up in dir (its state.env), for
// tools outside a test (cmd/e2ectl). Stopping it stays with whoever started it.
func Attach(dir string) (*ControlPlane, error) { return load(dir, false) }

// ReadEnvFile reads a KEY=VALUE file such as the state.env that scripts/controlplane writes.
func ReadEnvFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			out[k] = v
		}
	}
	return out, nil
}

// runScript runs scripts/controlplane ARGS with AW_E2E_DIR=dir (plus extra env) and returns its
// combined output.
func runScript(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command(ControlPlaneScript(), args...)
	cmd.Env = append(append(os.Environ(), "AW_E2E_DIR="+dir), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Setup is the first line of every e2e test: it returns the package's control plane and, when the
// test fails, prints the tail of the kube-apiserver log.
func Setup(t testing.TB) *ControlPlane {
	t.Helper()
	if shared == nil {
		if sharedErr != nil {
			t.Fatalf("no control plane: %v", sharedErr)
		}
		t.Fatal("no control plane: call harness.Main(m) from TestMain")
	}
	cp := shared
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- kube-apiserver log (last 60 lines) %s/kube-apiserver.log\n%s", cp.Dir, cp.APIServerLogTail(60))
		}
	})
	return cp
}

// RESTConfig is a client configuration for one identity (Admin, Resolver, ...), with generous QPS.
func (cp *ControlPlane) RESTConfig(t testing.TB, identity string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: cp.Kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: identity}).ClientConfig()
	if err != nil {
		t.Fatalf("kubeconfig context %q: %v", identity, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	cfg.Timeout = 30 * time.Second
	return cfg
}

// Dynamic is a dynamic client (GameServers, Fleets, CRDs...) acting as identity.
func (cp *ControlPlane) Dynamic(t testing.TB, identity string) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(cp.RESTConfig(t, identity))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Clientset is a typed client (namespaces, events, leases...) acting as identity.
func (cp *ControlPlane) Clientset(t testing.TB, identity string) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cp.RESTConfig(t, identity))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Token is the bearer token of identity (also in Dir/tokens/<identity>).
func (cp *ControlPlane) Token(t testing.TB, identity string) string {
	t.Helper()
	b, err := os.ReadFile(cp.TokenPath(identity))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TokenPath is the file holding identity's token (one line, no newline handling needed by readers
// that trim). Tests of token-file rotation copy these into their own file.
func (cp *ControlPlane) TokenPath(identity string) string {
	return filepath.Join(cp.Dir, "tokens", identity)
}

// Kubectl runs the control plane's kubectl as identity with stdin (may be empty) and returns stdout,
// stderr and the error (non-nil on a non-zero exit). It never fails the test by itself.
func (cp *ControlPlane) Kubectl(identity, stdin string, args ...string) (string, string, error) {
	return cp.kubectlWith(cp.Kubeconfig, identity, stdin, args...)
}

func (cp *ControlPlane) kubectlWith(kubeconfig, context, stdin string, args ...string) (string, string, error) {
	full := append([]string{"--kubeconfig", kubeconfig, "--context", context}, args...)
	cmd := exec.Command(cp.KubectlPath, full...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	return so.String(), se.String(), err
}

// MustKubectl is Kubectl that fails the test on error.
func (cp *ControlPlane) MustKubectl(t testing.TB, identity, stdin string, args ...string) string {
	t.Helper()
	so, se, err := cp.Kubectl(identity, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, so, se)
	}
	return so
}

// StopAPIServer stops kube-apiserver alone (etcd keeps running); clients see connection errors.
func (cp *ControlPlane) StopAPIServer(t testing.TB) {
	t.Helper()
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if out, err := runScript(cp.Dir, nil, "stop-apiserver"); err != nil {
		t.Fatalf("stop-apiserver: %v\n%s", err, out)
	}
}

// StartAPIServer starts kube-apiserver again on the same port and waits for /readyz. extraFlags
// replace the extra flags of the previous start (nil keeps them; pass []string{} to clear them).
func (cp *ControlPlane) StartAPIServer(t testing.TB, extraFlags []string) {
	t.Helper()
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if out, err := runScript(cp.Dir, flagsEnv(extraFlags), "start-apiserver"); err != nil {
		t.Fatalf("start-apiserver: %v\n%s", err, out)
	}
}

// RestartAPIServer is StopAPIServer then StartAPIServer(extraFlags).
func (cp *ControlPlane) RestartAPIServer(t testing.TB, extraFlags []string) {
	t.Helper()
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if out, err := runScript(cp.Dir, flagsEnv(extraFlags), "restart-apiserver"); err != nil {
		t.Fatalf("restart-apiserver: %v\n%s", err, out)
	}
}

func flagsEnv(extra []string) []string {
	if extra == nil {
		return nil
	}
	return []string{"AW_APISERVER_FLAGS=" + strings.Join(extra, " ")}
}

// APIServerLogTail returns the last n lines of the kube-apiserver log.
func (cp *ControlPlane) APIServerLogTail(n int) string {
	return tailFile(filepath.Join(cp.Dir, "kube-apiserver.log"), n)
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Ctx is a context for one API call sequence, cancelled at the end of the test.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
