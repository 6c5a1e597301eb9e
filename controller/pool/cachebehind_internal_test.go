package pool

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestCacheBehind: a pass whose cache does not show the pool's last status
// write yet, and computes the status that cache holds, must look again
// rather than skip the write (explorer seed 96057 of
// cluster-pool-image-revert-mid-reboot).
func TestCacheBehind(t *testing.T) {
	status := func(summary string) v1alpha1.BootcNodePoolStatus {
		return v1alpha1.BootcNodePoolStatus{Summary: summary}
	}
	pool := &v1alpha1.BootcNodePool{}
	pool.Name, pool.UID = "workers", "uid-1"
	older, written, now := status("3/3 updated"), status("2/3 updated; 1 pending"), status("3/3 updated")
	for _, tc := range []struct {
		name       string
		wroteUID   types.UID
		wrote      *v1alpha1.BootcNodePoolStatus
		cached, st v1alpha1.BootcNodePoolStatus
		want       bool
	}{
		{"cache older than the last write, pass equal to the cache", "uid-1", &written, older, now, true},
		{"cache shows the last write", "uid-1", &written, written, now, false},
		{"pass computes the last write", "uid-1", &written, older, written, false},
		{"no write yet (a new process)", "", nil, older, now, false},
		{"last write was of an earlier pool of that name", "uid-0", &written, older, now, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{}
			if tc.wrote != nil {
				r.wrote = map[string]wroteStatus{pool.Name: {uid: tc.wroteUID, status: *tc.wrote}}
			}
			if got := r.cacheBehind(pool, &tc.cached, &tc.st); got != tc.want {
				t.Errorf("cacheBehind = %v, want %v", got, tc.want)
			}
		})
	}
}
