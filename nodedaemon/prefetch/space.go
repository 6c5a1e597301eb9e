package prefetch

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// PullFactor is how many times an image's compressed size a pull needs
// free while it runs: containerd keeps the downloaded blob in its content
// store and unpacks a copy into the snapshotter (cri-errors.md: about 2x).
// Staging an OS image is held to the same factor.
const PullFactor = 2

// Space is the image filesystem: its size and the bytes still free.
type Space struct {
	Capacity  int64
	Available int64
}

// PullNeed is the free space a pull of an image of compressed size bytes
// needs while it runs.
func PullNeed(size int64) int64 { return PullFactor * max(size, 0) }

// StagingNeed is the free space staging an OS image of compressed size
// bytes needs; the daemon passes it to Step as Observation.StagingReserve.
func StagingNeed(size int64) int64 { return PullFactor * max(size, 0) }

// CanStage reports whether an OS image of compressed size stagingSize fits
// in fsAvailable bytes. Pinned pulls are admitted only when they leave the
// staging reserve free (see Manager.Step), so a staging whose size the
// reserve covered fits once the pulls in flight end; a caller that must
// not wait for them subtracts InFlightNeed first.
func CanStage(fsAvailable, stagingSize int64) bool {
	return fsAvailable >= StagingNeed(stagingSize)
}

// MinFreeBytes is the minFreeAfterPull of a set in bytes on a filesystem
// of capacity bytes: nil means v1alpha1.DefaultMinFreeAfterPull. The CRD
// admits only "<n>%" (0-99) or a quantity with a unit; any other value
// (only the twin could make one) is read as the default, never as 0.
func MinFreeBytes(v *intstr.IntOrString, capacity int64) int64 {
	b, err := ParseMinFree(v, capacity)
	if err != nil {
		b, _ = ParseMinFree(nil, capacity)
	}
	return b
}

// ParseMinFree is MinFreeBytes that reports a bad value.
func ParseMinFree(v *intstr.IntOrString, capacity int64) (int64, error) {
	s := v1alpha1.DefaultMinFreeAfterPull
	if v != nil {
		if v.Type != intstr.String {
			return 0, fmt.Errorf("minFreeAfterPull %d: want a quantity with a unit or a percentage", v.IntVal)
		}
		s = v.StrVal
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 99 {
			return 0, fmt.Errorf("minFreeAfterPull %q: want a percentage from 0%% to 99%%", s)
		}
		// Split so that no product overflows.
		return capacity/100*int64(n) + capacity%100*int64(n)/100, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() < 0 {
		return 0, fmt.Errorf("minFreeAfterPull %q: want a quantity with a unit or a percentage", s)
	}
	return q.Value(), nil
}

// formatBytes writes n in binary units with one decimal, for messages.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	f := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		f /= unit
		if f < unit && f > -unit {
			return strconv.FormatFloat(f, 'f', 1, 64) + " " + u
		}
	}
	return strconv.FormatFloat(f/unit, 'f', 1, 64) + " PiB"
}
