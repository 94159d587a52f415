package harness

import (
	"strings"
	"time"
)

// Poll calls cond every interval until it returns true or timeout passes, then returns cond's
// last answer (one final check after the deadline, so a condition met just in time counts).
func Poll(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(interval)
	}
	return cond()
}

// MetricValue returns the value of the unlabelled series name in a Prometheus text exposition
// ("" when it is absent).
func MetricValue(exposition, name string) string {
	for _, l := range strings.Split(exposition, "\n") {
		if strings.HasPrefix(l, name+" ") {
			return strings.TrimSpace(strings.TrimPrefix(l, name+" "))
		}
	}
	return ""
}
