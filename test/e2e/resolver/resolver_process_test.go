package resolver

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agones-allocating-webhook/e2e/harness"
	"github.com/agones-allocating-webhook/e2e/standin"
)

// The game-server stand-in as a separate process (cmd/gamestandin): it reports Ready with its own
// ports, and on allocation loads for 1s, then answers its UDP probe and confirms through the SDK's
// JSON patch. A matchmaker's `kubectl wait` returns once the server is playable.
func TestGameStandinProcess(t *testing.T) {
	e := setup(t)
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "gamestandin")
	build := exec.Command("go", "build", "-o", bin, "./cmd/gamestandin")
	build.Dir = filepath.Join(root, "test", "e2e")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build gamestandin: %v\n%s", err, out)
	}

	gs := harness.NewGameServer("proc", true, harness.TimeoutKey, "30s",
		harness.ProbePortKey, "game", harness.ProbeTypeKey, "udp")
	_ = unstructured.SetNestedSlice(gs.Object, standin.SpecPorts(), "spec", "ports")
	if _, err := e.cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(e.ns).
		Create(harness.Ctx(t), gs, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The game server writes as its namespace's agones-sdk service account; its Ready status (address,
	// ports) is written as Agones' controller would.
	cmd := exec.CommandContext(ctx, bin, "--kubeconfig", e.sdk.Kubeconfig, "--context", "sdk",
		"--status-context", harness.AgonesController,
		"--namespace", e.ns, "--name", "proc", "--load-time", "1s", "--set-status")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("stand-in ports: %v", err)
	}
	var ports map[string]int
	if err := json.Unmarshal([]byte(line), &ports); err != nil || ports["game"] == 0 {
		t.Fatalf("stand-in printed %q", line)
	}
	e.waitState(t, "proc", "Ready", 10*time.Second)
	time.Sleep(300 * time.Millisecond) // its watch is established

	e.allocate(t, "proc")
	start := time.Now()
	out, err := exec.Command(e.cp.KubectlPath, "--kubeconfig", e.cp.Kubeconfig, "--context", harness.Admin,
		"-n", e.ns, "wait", "--for=jsonpath={.status.state}=Allocated", "gameserver/proc", "--timeout=30s").CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("kubectl wait: %v\n%s", err, out)
	}
	got := e.get(t, "proc")
	t.Logf("kubectl wait returned after %v (stand-in loads 1s): %s", took, strings.TrimSpace(string(out)))
	if took < time.Second || took > time.Second+period+2*time.Second {
		t.Errorf("kubectl wait returned after %v, want soon after the 1s load", took)
	}
	if harness.Annotation(got, harness.OutcomeKey) != "Confirmed" ||
		harness.Annotation(got, harness.ConfirmedKey) != harness.Annotation(got, harness.SdkReadyKey) {
		t.Errorf("want a confirmed promotion: %s", harness.Describe(got))
	}
}
