package twin

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/engine"
	"github.com/bootroll/bootroll/sim/scenario"
)

// gateUnder is a controller's gate under one API fault in effect for the
// next hour, with no request latency of its own.
func gateUnder(codes []scenario.APIErrorCode, rate float64) *gate {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	r := &runner{eng: engine.New(start, 1)}
	r.apiFaults = []*apiFault{{from: start, to: start.Add(time.Hour), f: scenario.Fault{
		APIErrors: &scenario.APIErrors{Codes: codes, Rate: rate}}}}
	return &gate{r: r, who: "controller"}
}

// TestThrottledRequestsAreRetriedByTheClient: a 429 is waited out and sent
// again, as client-go does with the Retry-After that kube-apiserver (and
// the cluster target's proxy) sends: the caller sees a 429 only when all
// eleven attempts were throttled, after ten waits of a second; any other
// failure reaches it at once.
func TestThrottledRequestsAreRetriedByTheClient(t *testing.T) {
	get := apiserver.Request{Verb: apiserver.VerbGet, Object: &corev1.Node{}}

	g := gateUnder([]scenario.APIErrorCode{"tooManyRequests"}, 1)
	d := g.Before(get)
	if !apierrors.IsTooManyRequests(d.Err) || d.Latency != 10*time.Second {
		t.Errorf("always throttled: err %v after %s, want a 429 after 10s", d.Err, d.Latency)
	}

	g = gateUnder([]scenario.APIErrorCode{"internalError"}, 1)
	if d := g.Before(get); !apierrors.IsInternalError(d.Err) || d.Latency != 0 {
		t.Errorf("always failing: err %v after %s, want a 500 at once", d.Err, d.Latency)
	}

	// Throttled half the time: nearly every request gets through, later.
	g = gateUnder([]scenario.APIErrorCode{"tooManyRequests"}, 0.5)
	failed, delayed := 0, 0
	var waited time.Duration
	for range 1000 {
		d := g.Before(get)
		if d.Err != nil {
			failed++
		}
		if d.Latency > 0 {
			delayed++
		}
		waited += d.Latency
	}
	if failed > 5 || delayed < 400 || delayed > 600 || waited < 800*time.Second || waited > 1200*time.Second {
		t.Errorf("throttled half the time: %d of 1000 failed, %d delayed, %s waited in all; want about 0, 500 and 1000s", failed, delayed, waited)
	}
}
