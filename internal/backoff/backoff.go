// Package backoff is bootroll's one exponential backoff: the delay before
// retry n, computed by k8s.io/apimachinery's wait.Backoff (no jitter, so
// the twin stays deterministic).
package backoff

import (
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Nth is the delay before retry n (1-based) after n failures: base, then
// doubled each time, capped at limit; zero for n <= 0.
func Nth(base, limit time.Duration, n int32) time.Duration {
	if n <= 0 {
		return 0
	}
	b := wait.Backoff{Duration: base, Factor: 2, Steps: int(n), Cap: limit}
	var d time.Duration
	for i := int32(0); i < n; i++ {
		if b.Steps < 1 {
			// Capped: wait.Backoff stops counting at the cap, and every
			// later retry waits the cap.
			return min(b.Duration, limit)
		}
		d = b.Step()
	}
	return min(d, limit)
}
