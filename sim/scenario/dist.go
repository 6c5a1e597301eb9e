package scenario

import (
	"math"
	"math/rand/v2"
	"reflect"
	"time"
)

var distributionType = reflect.TypeFor[Distribution]()

// Sample draws a duration from the distribution using r. A fixed
// distribution draws nothing from r; the others draw one value each, so a
// run's draws depend only on the order of the calls.
func (d Distribution) Sample(r *rand.Rand) time.Duration {
	var x float64
	switch d.Dist {
	case DistFixed:
		return d.Value
	case DistUniform:
		if d.Max <= d.Min {
			return d.Min
		}
		return d.Min + time.Duration(r.Int64N(int64(d.Max-d.Min)+1))
	case DistNormal:
		x = float64(d.Mean) + r.NormFloat64()*float64(d.Stddev)
	case DistLognormal:
		x = float64(d.Median) * math.Exp(d.Sigma*r.NormFloat64())
	default:
		return 0
	}
	lo, hi := float64(d.Min), math.Inf(1)
	if d.Max > 0 {
		hi = float64(d.Max)
	}
	x = math.Min(math.Max(x, lo), hi)
	if x >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(x)
}
