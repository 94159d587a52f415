// Package kube tests the C++ Kubernetes client (webhook/kube) against a real kube-apiserver through
// the kube-smoke program (test/kube-smoke, built next to the webhook): every verb, pagination, watch
// expiry (410), the GameServer watch cache across an API server restart, token-file rotation and
// events.
package kube

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agones-allocating-webhook/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// smokeBinary is env AW_KUBE_SMOKE, else kube-smoke next to the webhook binary (AW_BIN).
func smokeBinary(t testing.TB) string {
	t.Helper()
	p := os.Getenv("AW_KUBE_SMOKE")
	if p == "" {
		p = filepath.Join(filepath.Dir(harness.WebhookBinary()), "kube-smoke")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("kube-smoke binary %s: %v (cmake builds it with the tests; AW_KUBE_SMOKE overrides)", p, err)
	}
	return p
}

// runSmoke runs one scenario to completion and returns its stdout lines.
func runSmoke(t testing.TB, kubeconfig, context string, args ...string) ([]string, error) {
	t.Helper()
	full := append([]string{"--kubeconfig", kubeconfig, "--context", context}, args...)
	cmd := exec.Command(smokeBinary(t), full...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil {
		t.Logf("kube-smoke %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, out, stderr.String())
	}
	return lines, err
}

// smokeProc is a long-running kube-smoke scenario whose stdout lines are collected.
type smokeProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	lines []string
	done  chan struct{}
	logf  *os.File
}

func startSmoke(t testing.TB, kubeconfig, context string, args ...string) *smokeProc {
	t.Helper()
	full := append([]string{"--kubeconfig", kubeconfig, "--context", context}, args...)
	p := &smokeProc{cmd: exec.Command(smokeBinary(t), full...), done: make(chan struct{})}
	logPath := filepath.Join(t.TempDir(), "kube-smoke.stderr")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	p.logf = f
	p.cmd.Stderr = f
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(5 * time.Second)
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("---- kube-smoke %v stderr\n%s\n---- stdout\n%s", args, tail(string(b), 60), strings.Join(p.snapshot(), "\n"))
		}
	})
	return p
}

func tail(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func (p *smokeProc) snapshot() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// stop closes stdin (the scenario's signal to finish) and waits; kills after timeout.
func (p *smokeProc) stop(timeout time.Duration) bool {
	_ = p.stdin.Close()
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return false
	}
}

// waitFor polls cond every 100ms until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	return harness.Poll(timeout, 100*time.Millisecond, cond)
}
