package invariant

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/scenario"
)

// This file holds grant-in-window: a pool with maintenance windows gives a
// reboot slot only inside one of them (DESIGN.md section 3: "A node takes
// one of maxUnavailable reboot slots only when staged, in a maintenance
// window, and not blocked"; api/v1alpha1: "when any is set, reboot slots
// are only given inside one").
//
// A grant is a status.slots entry the pool's previous status did not have:
// a node newly listed, or listed again with another since (a fresh grant
// in place of a held entry, as a takeover of a node down in an earlier
// slot is). Its time is the entry's since. It is judged against the
// windows the pool's spec had at that time, as the checker read the spec
// from its own watch (windowsSeen): daily from start (UTC) for duration,
// the end excluded, opening on the listed weekdays (every day when none
// are listed), so a window that opens on a listed day and runs past
// midnight is open after midnight too (lastWindow, windowOn, read from the
// API's docs, not from the controller's code).
//
// What is not judged, by design:
//   - A pool whose spec had no windows at the grant's time: no windows
//     means always open (the API's documented rule).
//   - Slots already held: a slot granted inside a window is kept after the
//     window closes, or after an edit of spec.windows closes it, until the
//     node's update is done; the window bounds when updates start, and
//     taking a node's slot away mid-drain or mid-reboot would be worse.
//   - Nodes on the os-not-ready fast path: they are updated without a slot
//     (DESIGN.md section 3), whatever the windows, and are never listed in
//     status.slots.
//
// The API records since to the second (metav1.Time), the controller's
// grant instant lies in the second that follows it; the windows in effect
// at any moment of that second count (an edit of spec.windows within it
// is judged either way).

// windowsVersion is one spec.windows a pool had, from when the checker
// saw it (the pool's creation first).
type windowsVersion struct {
	from    time.Time
	windows []v1alpha1.MaintenanceWindow
}

// windowsChangedAt is when the pool's spec.windows last changed, as the
// checker saw it (the pool's creation first); zero before it saw the pool.
func (p *Pool) windowsChangedAt() time.Time {
	if len(p.windowsSeen) == 0 {
		return time.Time{}
	}
	return p.windowsSeen[len(p.windowsSeen)-1].from
}

// GrantResolution is the resolution to which the API records a slot's
// since: a grant made at any instant of [since, since+GrantResolution) is
// judged by the windows in effect during that second.
const GrantResolution = time.Second

// windowPool follows a pool event for grant-in-window: it keeps the
// history of the pool's spec.windows and judges the grants the event's
// status makes. A pool that never had windows costs O(1) per event; one
// that had them O(slots), as the World's own bookkeeping of the slots.
func (c *Checker) windowPool(p *Pool, o *v1alpha1.BootcNodePool, deleted bool) {
	if deleted {
		return
	}
	if h := p.windowsSeen; len(h) == 0 || !sameWindows(h[len(h)-1].windows, o.Spec.Windows) {
		p.windowsSeen = append(p.windowsSeen, windowsVersion{from: c.now(), windows: slices.Clone(o.Spec.Windows)})
		p.hadWindows = p.hadWindows || len(o.Spec.Windows) > 0
	}
	if !p.hadWindows || !c.enabled[scenario.InvGrantInWindow] {
		return
	}
	for _, s := range o.Status.Slots {
		if prev, ok := p.prevSlots[s.Node]; ok && prev.Since.Equal(&s.Since) {
			continue // held, not granted now
		}
		at := s.Since.Time
		ok, spec := p.grantInWindow(at)
		if ok {
			continue
		}
		c.record(Violation{Invariant: string(scenario.InvGrantInWindow), At: c.now().Sub(c.start), Objects: []string{"BootcNodePool/" + p.Name, "Node/" + s.Node},
			Message: fmt.Sprintf("pool %s gives node %s a reboot slot at %s (status.slots since %s), outside its maintenance windows (%s)",
				p.Name, s.Node, at.Sub(c.start), at.UTC().Format(time.RFC3339), spec)})
	}
}

// grantInWindow reports whether a grant at since falls inside the pool's
// spec.windows as they were then: the windows of any version in effect
// during [since, since+GrantResolution), where a version without windows
// is always open. Otherwise it describes the windows it was judged by.
func (p *Pool) grantInWindow(since time.Time) (bool, string) {
	var judged []string
	end := since.Add(GrantResolution)
	for i, v := range p.windowsSeen {
		// The first version stands for all time before it: the pool's
		// grants do not come before the checker saw it made.
		if i > 0 && !v.from.Before(end) {
			break
		}
		if i+1 < len(p.windowsSeen) && !p.windowsSeen[i+1].from.After(since) {
			continue // replaced before the grant
		}
		if len(v.windows) == 0 {
			return true, ""
		}
		if inside, _, _ := lastWindow(v.windows, since); inside {
			return true, ""
		}
		judged = append(judged, describeWindows(v.windows))
	}
	return false, strings.Join(judged, "; then ")
}

// describeWindows formats spec.windows for a message: "00:10 for 25m0s
// (Mon, Tue)", comma-separated.
func describeWindows(ws []v1alpha1.MaintenanceWindow) string {
	parts := make([]string, 0, len(ws))
	for _, w := range ws {
		s := w.Start + " UTC for " + w.Duration.Duration.String()
		if len(w.Days) > 0 {
			days := make([]string, len(w.Days))
			for i, d := range w.Days {
				days[i] = string(d)
			}
			s += " (" + strings.Join(days, ", ") + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}
