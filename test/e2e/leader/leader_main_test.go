// Package leader tests leader election between webhook processes on a real kube-apiserver: exactly
// one leads (metric and Lease agree), a SIGKILLed leader is replaced within lease duration + retry,
// and a SIGTERMed leader releases the Lease so the handover is faster.
package leader

import (
	"testing"

	"github.com/agones-allocating-webhook/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
