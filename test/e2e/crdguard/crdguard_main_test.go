// Package crdguard tests the CRD guard on a real kube-apiserver: it adds Allocating to the stock
// GameServer CRD's status.state enum so the webhook starts rewriting, repairs the CRD when it is
// reset (as an Agones upgrade would), and with RBAC denying the patch (or --manage-crd=false) it
// fails open: allocations stay Allocated and the gauge says 0.
package crdguard

import (
	"testing"

	"github.com/agones-allocating-webhook/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
