package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

const gameServerCRD = "gameservers.agones.dev"

// The JSON pointer of the GameServer CRD's status.state enum (first and only version, v1).
const stateEnumPath = "/spec/versions/0/schema/openAPIV3Schema/properties/status/properties/state/enum"

// StateEnum returns the GameServer CRD's status.state enum as stored.
func (cp *ControlPlane) StateEnum(t testing.TB) []string {
	t.Helper()
	crd, err := cp.Dynamic(t, Admin).Resource(CRDGVR).Get(context.Background(), gameServerCRD, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get CRD: %v", err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) == 0 {
		t.Fatal("GameServer CRD has no versions")
	}
	v0, _ := versions[0].(map[string]interface{})
	enum, _, _ := unstructured.NestedStringSlice(v0, "schema", "openAPIV3Schema", "properties", "status", "properties", "state", "enum")
	return enum
}

// EnumHasAllocating reports whether the stored CRD lists Allocating.
func (cp *ControlPlane) EnumHasAllocating(t testing.TB) bool {
	for _, s := range cp.StateEnum(t) {
		if s == "Allocating" {
			return true
		}
	}
	return false
}

// AddAllocatingToEnum patches Allocating into the GameServer CRD's state enum (what the CRD guard
// does in production) and waits until kube-apiserver validates with the new schema.
func (cp *ControlPlane) AddAllocatingToEnum(t testing.TB) {
	t.Helper()
	if !cp.EnumHasAllocating(t) {
		patch, _ := json.Marshal([]map[string]interface{}{
			{"op": "add", "path": stateEnumPath + "/-", "value": "Allocating"},
		})
		_, err := cp.Dynamic(t, Admin).Resource(CRDGVR).Patch(context.Background(), gameServerCRD,
			types.JSONPatchType, patch, metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("patch Allocating into the CRD enum: %v", err)
		}
	}
	cp.waitSchema(t, true)
}

// ResetStockCRD puts the GameServer CRD back to the stock fixture (no Allocating) and waits until
// kube-apiserver rejects Allocating again.
func (cp *ControlPlane) ResetStockCRD(t testing.TB) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(TestdataDir(), "crds", "gameserver.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var stock map[string]interface{}
	if err := yaml.Unmarshal(b, &stock); err != nil {
		t.Fatal(err)
	}
	dyn := cp.Dynamic(t, Admin).Resource(CRDGVR)
	for i := 0; ; i++ {
		cur, err := dyn.Get(context.Background(), gameServerCRD, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get CRD: %v", err)
		}
		cur.Object["spec"] = stock["spec"]
		if _, err = dyn.Update(context.Background(), cur, metav1.UpdateOptions{}); err == nil {
			break
		} else if i > 5 {
			t.Fatalf("reset CRD: %v", err)
		}
	}
	cp.waitSchema(t, false)
}

// waitSchema polls a server-side dry-run CREATE of a GameServer (not opted in, so no webhook is
// involved) in state Allocating until it is accepted (want=true) or refused (want=false).
func (cp *ControlPlane) waitSchema(t testing.TB, want bool) {
	t.Helper()
	gs := NewGameServer("schema-probe", false)
	_ = unstructured.SetNestedField(gs.Object, "Allocating", "status", "state")
	dyn := cp.Dynamic(t, Admin).Resource(GameServerGVR).Namespace("default")
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		_, err := dyn.Create(context.Background(), gs, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if (err == nil) == want {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s", fmt.Sprintf("CRD schema change not effective after 30s (want Allocating accepted=%v, last error %v)", want, last))
}
