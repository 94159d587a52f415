package harness

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// WebhookOptions configure one webhook process.
type WebhookOptions struct {
	// Args are extra flags. A flag named here (--name or --name=value) replaces the harness default of
	// the same name (defaults: --bind-address=127.0.0.1, --port, --health-port, --tls-cert-file, --tls-key-file,
	// --trusted-users=ResolverUser, --agones-controller-users=AgonesControllerUser, --log-format=json).
	Args []string
	// CertDir holds tls.crt, tls.key and ca.crt; "" uses the control plane's shared test certificate
	// (SANs 127.0.0.1 and localhost, made once by scripts/gen-certs).
	CertDir string
	// Port and HealthPort: 0 picks free ports.
	Port, HealthPort int
	// Env is added to the process environment.
	Env []string
	// Name labels the log file and messages (default "webhook").
	Name string
	// Wait: "healthz" (default) waits for GET /healthz == 200, "readyz" for /readyz, "none" returns
	// as soon as the process is started.
	Wait string
	// Binary overrides WebhookBinary().
	Binary string
	// NoDefaults names harness defaults not to pass at all (e.g. "trusted-users" for a binary
	// without that flag, such as allocation-gateway).
	NoDefaults []string
}

// Webhook is one running webhook process.
type Webhook struct {
	Name       string
	Port       int    // HTTPS admission port
	HealthPort int    // plain HTTP /healthz /readyz /metrics
	CertDir    string // tls.crt, tls.key, ca.crt
	CAFile     string // CertDir/ca.crt: the caBundle to register
	LogPath    string
	Args       []string

	cmd     *exec.Cmd
	pidFile string
	done    chan struct{}
	waitErr error
	stopped atomic.Bool
	mu      sync.Mutex
}

var webhookSeq atomic.Int64

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// WebhookCerts returns the control plane's shared webhook certificate directory, creating it on
// first use with scripts/gen-certs DIR 127.0.0.1 localhost.
func (cp *ControlPlane) WebhookCerts(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(cp.Dir, "webhook-certs")
	if _, err := os.Stat(filepath.Join(dir, "tls.crt")); err == nil {
		return dir
	}
	GenCerts(t, dir, "127.0.0.1", "localhost")
	return dir
}

// GenCerts runs scripts/gen-certs DIR SANS... (a new CA and serving certificate; env may carry
// REUSE_CA=1 to keep the CA, see the script).
func GenCerts(t testing.TB, dir string, sans ...string) {
	t.Helper()
	GenCertsEnv(t, nil, dir, sans...)
}

// GenCertsEnv is GenCerts with extra environment (e.g. "REUSE_CA=1", "DAYS=1").
func GenCertsEnv(t testing.TB, env []string, dir string, sans ...string) {
	t.Helper()
	cmd := exec.Command(GenCertsScript(), append([]string{dir}, sans...)...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/gen-certs %s: %v\n%s", dir, err, out)
	}
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--"+name || strings.HasPrefix(a, "--"+name+"=") {
			return true
		}
	}
	return false
}

// StartWebhook starts a webhook process (AW_BIN) and waits for it (see WebhookOptions.Wait). It is
// stopped with SIGTERM at the end of the test; if the test failed, its log is printed.
func (cp *ControlPlane) StartWebhook(t testing.TB, opts WebhookOptions) *Webhook {
	t.Helper()
	bin := opts.Binary
	if bin == "" {
		bin = WebhookBinary()
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("webhook binary %s: %v (build it: scripts/test builds build/allocating-webhook; AW_BIN overrides)", bin, err)
	}
	certDir := opts.CertDir
	if certDir == "" {
		certDir = cp.WebhookCerts(t)
	}
	name := opts.Name
	if name == "" {
		name = "webhook"
	}
	n := webhookSeq.Add(1)
	logDir := filepath.Join(cp.Dir, "webhooks")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	w := &Webhook{
		Name:       name,
		Port:       opts.Port,
		HealthPort: opts.HealthPort,
		CertDir:    certDir,
		CAFile:     filepath.Join(certDir, "ca.crt"),
		LogPath:    filepath.Join(logDir, fmt.Sprintf("%s-%d-%d.log", name, os.Getpid(), n)),
		done:       make(chan struct{}),
	}
	if w.Port == 0 {
		w.Port = FreePort(t)
	}
	if w.HealthPort == 0 {
		for w.HealthPort == 0 || w.HealthPort == w.Port {
			w.HealthPort = FreePort(t)
		}
	}
	defaults := []struct{ name, value string }{
		{"bind-address", "127.0.0.1"},
		{"port", strconv.Itoa(w.Port)},
		{"health-port", strconv.Itoa(w.HealthPort)},
		{"tls-cert-file", filepath.Join(certDir, "tls.crt")},
		{"tls-key-file", filepath.Join(certDir, "tls.key")},
		{"trusted-users", ResolverUser},
		{"agones-controller-users", AgonesControllerUser},
		{"log-format", "json"},
	}
	for _, d := range defaults {
		if !hasFlag(opts.Args, d.name) && !slices.Contains(opts.NoDefaults, d.name) {
			w.Args = append(w.Args, "--"+d.name+"="+d.value)
		}
	}
	w.Args = append(w.Args, opts.Args...)

	logf, err := os.OpenFile(w.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	w.cmd = exec.Command(bin, w.Args...)
	w.cmd.Stdout, w.cmd.Stderr = logf, logf
	w.cmd.Env = append(os.Environ(), opts.Env...)
	// Own process group; killed if the test binary dies (no orphan webhook).
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := w.cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start %s: %v", bin, err)
	}
	w.pidFile = filepath.Join(logDir, fmt.Sprintf("%d.pid", w.cmd.Process.Pid))
	_ = os.WriteFile(w.pidFile, []byte(strconv.Itoa(w.cmd.Process.Pid)), 0o644)
	go func() {
		w.waitErr = w.cmd.Wait()
		logf.Close()
		_ = os.Remove(w.pidFile)
		close(w.done)
	}()
	t.Cleanup(func() {
		w.Stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("---- %s log (last 100 lines) %s\n%s", w.Name, w.LogPath, w.LogTail(100))
		}
	})
	switch opts.Wait {
	case "none":
	case "readyz":
		w.waitHTTP(t, "/readyz")
	default:
		w.waitHTTP(t, "/healthz")
	}
	return w
}

func (w *Webhook) waitHTTP(t testing.TB, path string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	client := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		if !w.Running() {
			t.Fatalf("%s exited during startup (%v); args %v\n%s", w.Name, w.waitErr, w.Args, w.LogTail(60))
		}
		resp, err := client.Get(w.HealthURL(path))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: %s not 200 after 20s; args %v\n%s", w.Name, path, w.Args, w.LogTail(60))
}

// URL is https://127.0.0.1:Port + path.
func (w *Webhook) URL(path string) string { return fmt.Sprintf("https://127.0.0.1:%d%s", w.Port, path) }

// HealthURL is http://127.0.0.1:HealthPort + path.
func (w *Webhook) HealthURL(path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", w.HealthPort, path)
}

// Pid is the process id.
func (w *Webhook) Pid() int { return w.cmd.Process.Pid }

// Running reports whether the process has not exited.
func (w *Webhook) Running() bool {
	select {
	case <-w.done:
		return false
	default:
		return true
	}
}

// Signal sends sig without waiting.
func (w *Webhook) Signal(sig syscall.Signal) error { return w.cmd.Process.Signal(sig) }

// Stop sends sig (SIGTERM for a graceful stop, SIGKILL for a crash) and waits for the exit (SIGKILL
// after 15s). It returns the process's exit error (nil on exit status 0). Idempotent.
func (w *Webhook) Stop(sig syscall.Signal) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.Running() {
		_ = w.cmd.Process.Signal(sig)
		select {
		case <-w.done:
		case <-time.After(15 * time.Second):
			_ = w.cmd.Process.Kill()
			<-w.done
		}
	}
	w.stopped.Store(true)
	return w.waitErr
}

// Kill is Stop(SIGKILL).
func (w *Webhook) Kill() { _ = w.Stop(syscall.SIGKILL) }

// Wait waits up to timeout for the process to exit by itself; ok is false on timeout.
func (w *Webhook) Wait(timeout time.Duration) (err error, ok bool) {
	select {
	case <-w.done:
		return w.waitErr, true
	case <-time.After(timeout):
		return nil, false
	}
}

// ExitCode is the exit status after the process ended (-1 if killed by a signal or still running).
func (w *Webhook) ExitCode() int {
	if w.Running() || w.cmd.ProcessState == nil {
		return -1
	}
	return w.cmd.ProcessState.ExitCode()
}

// Logs returns everything the process wrote (stdout and stderr) so far.
func (w *Webhook) Logs() string {
	b, _ := os.ReadFile(w.LogPath)
	return string(b)
}

// LogTail returns the last n lines of the log.
func (w *Webhook) LogTail(n int) string { return tailFile(w.LogPath, n) }

// Get fetches http://127.0.0.1:HealthPort + path and returns status code and body.
func (w *Webhook) Get(path string) (int, string, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(w.HealthURL(path))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// IsLeader reports whether the process's /metrics says allocating_webhook_leader 1 (false when
// /metrics cannot be read).
func (w *Webhook) IsLeader() bool {
	code, body, err := w.Get("/metrics")
	if err != nil || code != http.StatusOK {
		return false
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "allocating_webhook_leader") && strings.HasSuffix(strings.TrimSpace(line), " 1") {
			return true
		}
	}
	return false
}

// WaitLeader waits up to timeout for IsLeader, and fails the test with the log's tail otherwise.
func (w *Webhook) WaitLeader(t testing.TB, timeout time.Duration) {
	t.Helper()
	if !Poll(timeout, 100*time.Millisecond, w.IsLeader) {
		t.Fatalf("%s never became leader; log tail:\n%s", w.Name, w.LogTail(40))
	}
}

// Metrics returns the /metrics text.
func (w *Webhook) Metrics(t testing.TB) string {
	t.Helper()
	code, body, err := w.Get("/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("%s /metrics: %d %v", w.Name, code, err)
	}
	return body
}
