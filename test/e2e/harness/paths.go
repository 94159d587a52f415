// Package harness runs the project's end-to-end tests against a real kube-apiserver: it starts (or
// joins) a loopback control plane per test package (scripts/controlplane), hands out clients and
// kubectl for the test identities, starts and stops webhook processes, registers the webhook
// configurations from manifests/ through kustomize, and prints the API server's and the webhook's
// logs when a test fails. See test/e2e/HARNESS.md.
package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

var (
	rootOnce sync.Once
	rootDir  string
	rootErr  error
)

// RepoRoot is the repository's root directory (env AW_ROOT, else the first ancestor of the working
// directory that holds test/e2e/go.mod).
func RepoRoot() (string, error) {
	rootOnce.Do(func() {
		if r := os.Getenv("AW_ROOT"); r != "" {
			rootDir, rootErr = filepath.Abs(r)
			return
		}
		wd, err := os.Getwd()
		if err != nil {
			rootErr = err
			return
		}
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "test", "e2e", "go.mod")); err == nil {
				rootDir = d
				return
			}
			if filepath.Dir(d) == d {
				rootErr = fmt.Errorf("harness: no repository root above %s (set AW_ROOT)", wd)
				return
			}
		}
	})
	return rootDir, rootErr
}

func mustRoot() string {
	r, err := RepoRoot()
	if err != nil {
		panic(err)
	}
	return r
}

// WebhookBinary is the webhook under test: env AW_BIN, else <root>/build/allocating-webhook.
func WebhookBinary() string {
	if b := os.Getenv("AW_BIN"); b != "" {
		return b
	}
	return filepath.Join(mustRoot(), "build", "allocating-webhook")
}

// GatewayBinary is the allocation-gateway binary: $AW_GATEWAY_BIN, else allocation-gateway beside
// WebhookBinary().
func GatewayBinary() string {
	if b := os.Getenv("AW_GATEWAY_BIN"); b != "" {
		return b
	}
	return filepath.Join(filepath.Dir(WebhookBinary()), "allocation-gateway")
}

// ControlPlaneScript is scripts/controlplane.
func ControlPlaneScript() string { return filepath.Join(mustRoot(), "scripts", "controlplane") }

// GenCertsScript is scripts/gen-certs.
func GenCertsScript() string { return filepath.Join(mustRoot(), "scripts", "gen-certs") }

// TestdataDir is test/e2e/testdata.
func TestdataDir() string { return filepath.Join(mustRoot(), "test", "e2e", "testdata") }

// ManifestsDir is manifests/.
func ManifestsDir() string { return filepath.Join(mustRoot(), "manifests") }
