package parallel

import (
	"sync/atomic"
	"testing"
)

// Every index runs exactly once, whatever the number of workers, and no
// more than jobs run at once.
func TestForRunsEachIndexOnce(t *testing.T) {
	for _, jobs := range []int{0, 1, 3, 100} {
		const n = 50
		var seen [n]atomic.Int32
		var running, peak atomic.Int32
		For(jobs, n, func(i int) {
			r := running.Add(1)
			for {
				p := peak.Load()
				if r <= p || peak.CompareAndSwap(p, r) {
					break
				}
			}
			seen[i].Add(1)
			running.Add(-1)
		})
		for i := range seen {
			if c := seen[i].Load(); c != 1 {
				t.Errorf("jobs %d: index %d ran %d times", jobs, i, c)
			}
		}
		if p := peak.Load(); p > int32(max(1, jobs)) {
			t.Errorf("jobs %d: %d ran at once", jobs, p)
		}
	}
	For(2, 0, func(int) { t.Error("called with n = 0") })
}
