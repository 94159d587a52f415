// Package manifests checks what cluster admins install (manifests/ and scripts/install-certs)
// against a real kube-apiserver: it runs manifests/check.sh, one subtest per check, on this
// package's own control plane (harness.Main), with the control plane's kubectl first on PATH.
package manifests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agones-allocating-webhook/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

var checks = []string{
	"render", "dry-run", "pod-security", "rbac", "install-certs", "image-rootfs", "rbac-live", "example-flow", "failure-policy", "gateway",
}

func TestManifests(t *testing.T) {
	cp := harness.Setup(t)
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "test", "e2e", "manifests", "check.sh")
	path := filepath.Dir(cp.KubectlPath) + string(os.PathListSeparator) + os.Getenv("PATH")

	for _, check := range checks {
		t.Run(check, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, script, "--kubeconfig", cp.Kubeconfig, "--only", check)
			cmd.Env = append(os.Environ(), "PATH="+path)
			// On timeout, SIGTERM lets the script stop the processes it started (webhook, UDP echo).
			cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
			cmd.WaitDelay = 15 * time.Second
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", check, err, out)
			}
			if testing.Verbose() {
				t.Log("\n" + strings.TrimSpace(string(out)))
			}
		})
	}
}
