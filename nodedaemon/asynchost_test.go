package nodedaemon

import (
	"context"
	"errors"
	"testing"
)

// TestAsyncHostGo: with Go set, AsyncHost starts no goroutine; the stage
// runs when the caller of Go says, with the same bookkeeping.
func TestAsyncHostGo(t *testing.T) {
	inner := &blockingHost{fakeHost: fakeHost{t: t, obs: onOld()}, release: make(chan error, 1)}
	var started []string
	var run func()
	done := 0
	a := &AsyncHost{Host: inner, OnDone: func() { done++ }, Go: func(image string, stage func()) {
		started, run = append(started, image), stage
	}}
	ctx := context.Background()
	if err := a.Stage(ctx, imgA); err != nil {
		t.Fatalf("Stage: %v", err)
	}
	if len(started) != 1 || started[0] != imgA || run == nil {
		t.Fatalf("Go called with %v, want [%s]", started, imgA)
	}
	if obs, err := a.Observe(ctx); err != nil || !obs.Staging || obs.LastStage != nil {
		t.Errorf("before the stage runs: %+v %v, want Staging", obs, err)
	}
	if err := a.Rollback(ctx); !errors.Is(err, errStaging) {
		t.Errorf("Rollback while staging = %v, want errStaging", err)
	}
	inner.release <- nil
	run()
	if done != 1 {
		t.Errorf("OnDone called %d times, want 1", done)
	}
	obs, err := a.Observe(ctx)
	if err != nil || obs.Staging || obs.LastStage == nil || obs.LastStage.Image != imgA || obs.LastStage.Err != "" || obs.Staged == nil {
		t.Errorf("after the stage ran: %+v %v, want LastStage ok and %s staged", obs, err, imgA)
	}
}
