package scenario

// CrashCount is what a crash-after-a-step fault (controllerCrash,
// daemonWriteCrash) has counted for one process: its successful steps
// since the fault began, and whether its afterWrites crash happened. The
// twin, the cluster target's API proxy and the host-mode daemon count
// with it, so that a fault crashes a process after the same step on
// every target.
type CrashCount struct {
	Steps int
	Done  bool
}

// Step counts one successful step and reports whether the fault crashes
// the process right after it: at the afterWrites-th step, once; without
// afterWrites, with probability rate, drawing from draw (a uniform number
// in [0, 1)) only when rate is positive.
func (c *CrashCount) Step(afterWrites int, rate float64, draw func() float64) bool {
	if afterWrites > 0 {
		if c.Done {
			return false
		}
		c.Steps++
		c.Done = c.Steps == afterWrites
		return c.Done
	}
	return rate > 0 && draw() < rate
}

// Span reports whether f is in effect over a span rather than at one
// time (apiErrors, watchFaults, controllerCrash, daemonWriteCrash): from
// its time, or over its window; without a window it lasts to the
// scenario's limit, but keeps a run from settling only until it starts.
func (f *Fault) Span() bool {
	return f.APIErrors != nil || f.WatchFaults != nil || f.ControllerCrash != nil || f.DaemonWriteCrash != nil
}
