package twin_test

import (
	"testing"
	"time"

	"github.com/bootroll/bootroll/sim/invariant"
	"github.com/bootroll/bootroll/sim/twin"
)

// TestRunObservesUntilProtectionEnds checks that a converged run goes on
// past Settle until the last post-update protection has ended and
// Karpenter has had time to react (Checker.QuietUntil): in
// post-update-emptiness-reaping the last node's 5m protection ends well
// after convergence, and Karpenter's emptiness deletion that follows must
// be in the trace.
func TestRunObservesUntilProtectionEnds(t *testing.T) {
	sc := load(t, "post-update-emptiness-reaping.yaml")
	res, data := run(t, sc, 0)
	if !res.Converged {
		t.Fatalf("not converged: %v", res.Violations)
	}
	var lastEnd, reaped time.Time
	for _, l := range parseTrace(t, data) {
		at, err := time.Parse(time.RFC3339Nano, l.T)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case l.Kind == "event" && l.Details["reason"] == "ProtectionEnded":
			lastEnd = at
		case l.Kind == "karpenter/disrupt" && !lastEnd.IsZero():
			reaped = at
		}
	}
	if lastEnd.IsZero() {
		t.Fatal("no ProtectionEnded event")
	}
	if lastEnd.Sub(res.Start) <= res.ConvergedAt+twin.Settle {
		t.Fatalf("the last protection ended at %s, not after converged %s + Settle: the scenario no longer tests this", lastEnd.Sub(res.Start), res.ConvergedAt)
	}
	if min := lastEnd.Sub(res.Start) + invariant.KarpenterReaction; res.End < min {
		t.Errorf("run ended at %s, before the last protection end + Karpenter's reaction (%s)", res.End, min)
	}
	if reaped.IsZero() {
		t.Error("Karpenter's reaction to the unprotected node is not in the trace")
	}
}
