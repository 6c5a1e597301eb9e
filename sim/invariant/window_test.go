package invariant

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/scenario"
)

// window is a maintenance window starting at start (UTC) for d, on days.
func window(start string, d time.Duration, days ...v1alpha1.Weekday) v1alpha1.MaintenanceWindow {
	return v1alpha1.MaintenanceWindow{Days: days, Start: start, Duration: metav1.Duration{Duration: d}}
}

// windowStep is one thing that happens to the pool in a grant-in-window
// case, at a time from t0 (00:00 UTC, a Monday).
type windowStep struct {
	at time.Duration
	// windows, when set, become spec.windows (an empty list removes them).
	windows []v1alpha1.MaintenanceWindow
	// node, when set, is listed in status.slots with since at since from
	// t0 (replacing its entry when it has one); drop removes it instead.
	node  string
	since time.Duration
	drop  bool
}

// TestGrantInWindow: a grant (a node newly listed in status.slots, or
// listed again with another since) must fall inside the windows the
// pool's spec had at its since, the end excluded, on the days they open;
// a held slot is not judged again, and a pool without windows is always
// open.
func TestGrantInWindow(t *testing.T) {
	const target = imgB
	daily := window("00:10", 25*time.Minute) // 00:10 to 00:35 every day
	later := window("00:50", 30*time.Minute) // 00:50 to 01:20 every day
	set := func(at time.Duration, ws ...v1alpha1.MaintenanceWindow) windowStep {
		if ws == nil {
			ws = []v1alpha1.MaintenanceWindow{}
		}
		return windowStep{at: at, windows: ws}
	}
	grant := func(node string, since, seen time.Duration) windowStep {
		return windowStep{at: seen, node: node, since: since}
	}
	const ms = time.Millisecond
	const day = 24 * time.Hour
	for _, tc := range []struct {
		name  string
		steps []windowStep
		want  int
	}{
		{"no windows: always open", []windowStep{grant("a", 5*time.Minute, 5*time.Minute+ms)}, 0},
		{"windows removed before the grant", []windowStep{set(0, daily), set(time.Minute), grant("a", 5*time.Minute, 5*time.Minute+ms)}, 0},
		{"inside", []windowStep{set(0, daily), grant("a", 20*time.Minute, 20*time.Minute+ms)}, 0},
		{"at the opening", []windowStep{set(0, daily), grant("a", 10*time.Minute, 10*time.Minute+ms)}, 0},
		{"the last second", []windowStep{set(0, daily), grant("a", 35*time.Minute-time.Second, 35*time.Minute+ms)}, 0},
		{"at the end, excluded", []windowStep{set(0, daily), grant("a", 35*time.Minute, 35*time.Minute+ms)}, 1},
		{"the second before it opens", []windowStep{set(0, daily), grant("a", 10*time.Minute-time.Second, 10*time.Minute-time.Second+ms)}, 1},
		{"between two windows", []windowStep{set(0, daily, later), grant("a", 40*time.Minute, 40*time.Minute+ms)}, 1},
		{"in the second of two windows", []windowStep{set(0, daily, later), grant("a", time.Hour, time.Hour+ms)}, 0},
		{"the next day", []windowStep{set(0, daily), grant("a", day+15*time.Minute, day+15*time.Minute+ms)}, 0},
		// Weekdays name the day a window opens: Sunday's 23:30 window runs
		// into Monday; a Tuesday window is shut on Monday.
		{"a Sunday window past midnight on Monday", []windowStep{set(0, window("23:30", time.Hour, "Sun")), grant("a", 15*time.Minute, 15*time.Minute+ms)}, 0},
		{"a Sunday window, Monday night", []windowStep{set(0, window("23:30", time.Hour, "Sun")), grant("a", 23*time.Hour+45*time.Minute, 23*time.Hour+45*time.Minute+ms)}, 1},
		{"a Tuesday window on Monday", []windowStep{set(0, window("00:10", 25*time.Minute, "Tue")), grant("a", 15*time.Minute, 15*time.Minute+ms)}, 1},
		{"a Tuesday window on Tuesday", []windowStep{set(0, window("00:10", 25*time.Minute, "Tue")), grant("a", day+15*time.Minute, day+15*time.Minute+ms)}, 0},
		// A slot granted inside a window is held after it closes, and
		// after an edit that closes it: not a new grant.
		{"held past the close", []windowStep{set(0, daily), grant("a", 15*time.Minute, 15*time.Minute+ms), grant("b", 20*time.Minute, 20*time.Minute+ms), {at: 40 * time.Minute, node: "b", drop: true}}, 0},
		{"held past an edit that closes the window", []windowStep{set(0, daily), grant("a", 15*time.Minute, 15*time.Minute+ms), set(20*time.Minute, later), grant("b", 55*time.Minute, 55*time.Minute+ms)}, 0},
		// Judged by the windows the spec had at the grant's since.
		{"after an edit that closes the window", []windowStep{set(0, daily), set(20*time.Minute, later), grant("a", 25*time.Minute, 25*time.Minute+ms)}, 1},
		{"after an edit that opens one", []windowStep{set(0, later), set(20*time.Minute, daily), grant("a", 25*time.Minute, 25*time.Minute+ms)}, 0},
		{"before an edit that closes the window, seen after it", []windowStep{set(0, daily), set(20*time.Minute, later), grant("a", 20*time.Minute-30*time.Second, 20*time.Minute+30*time.Second)}, 0},
		{"before an edit that opens one, seen after it", []windowStep{set(0, later), set(20*time.Minute, daily), grant("a", 20*time.Minute-30*time.Second, 20*time.Minute+30*time.Second)}, 1},
		// The API keeps since to the second: an edit within the second
		// after since may have come before the grant or after it.
		{"an edit that closes the window within the second", []windowStep{set(0, daily), set(20*time.Minute+500*ms, later), grant("a", 20*time.Minute, 20*time.Minute+800*ms)}, 0},
		{"an edit that opens a window within the second", []windowStep{set(0, later), set(20*time.Minute+500*ms, daily), grant("a", 20*time.Minute, 20*time.Minute+800*ms)}, 0},
		{"an edit that opens a window the second after", []windowStep{set(0, later), set(20*time.Minute+time.Second+500*ms, daily), grant("a", 20*time.Minute, 20*time.Minute+time.Second+800*ms)}, 1},
		{"an edit that closes the window the second before", []windowStep{set(0, daily), set(20*time.Minute-500*ms, later), grant("a", 20*time.Minute, 20*time.Minute+800*ms)}, 1},
		// A fresh grant in place of a held entry (a takeover) is a grant.
		{"a takeover outside", []windowStep{set(0, daily), grant("a", 15*time.Minute, 15*time.Minute+ms), grant("a", 40*time.Minute, 40*time.Minute+ms)}, 1},
		{"a takeover inside", []windowStep{set(0, daily), grant("a", 15*time.Minute, 15*time.Minute+ms), grant("a", 30*time.Minute, 30*time.Minute+ms)}, 0},
		{"granted again after it was given back", []windowStep{set(0, daily), grant("a", 15*time.Minute, 15*time.Minute+ms), {at: 30 * time.Minute, node: "a", drop: true}, grant("a", 40*time.Minute, 40*time.Minute+ms)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil, intstr.FromInt32(2), "a", "b")
			for _, st := range tc.steps {
				f.at(st.at)
				f.setPool(func(p *v1alpha1.BootcNodePool) {
					if st.windows != nil {
						p.Spec.Windows = st.windows
						p.Generation++
					}
					if st.node == "" {
						return
					}
					kept := p.Status.Slots[:0:0]
					for _, s := range p.Status.Slots {
						if s.Node != st.node {
							kept = append(kept, s)
						}
					}
					if !st.drop {
						kept = append(kept, v1alpha1.Slot{Node: st.node, Image: target, Since: metav1.NewTime(t0.Add(st.since))})
					}
					p.Status.Slots = kept
				})
				f.check(st.at)
			}
			f.want(scenario.InvGrantInWindow, tc.want, tc.name)
		})
	}
}

// TestGrantInWindowMessage: the violation names the pool, the node, the
// grant's time and the windows it was judged by.
func TestGrantInWindowMessage(t *testing.T) {
	f := newFixture(t, nil, intstr.FromInt32(1), "a")
	f.setPool(func(p *v1alpha1.BootcNodePool) {
		p.Spec.Windows = []v1alpha1.MaintenanceWindow{window("01:00", 30*time.Minute, "Mon", "Tue")}
	})
	f.at(5*time.Minute + time.Millisecond)
	f.setPool(func(p *v1alpha1.BootcNodePool) {
		p.Status.Slots = []v1alpha1.Slot{{Node: "a", Image: imgB, Since: metav1.NewTime(t0.Add(5 * time.Minute))}}
	})
	vs := f.of(scenario.InvGrantInWindow)
	if len(vs) != 1 {
		t.Fatalf("violations %v, want one of grant-in-window", f.c.Violations())
	}
	v := vs[0]
	for _, want := range []string{"pool p gives node a a reboot slot at 5m0s", "2026-01-05T00:05:00Z", "01:00 UTC for 30m0s (Mon, Tue)"} {
		if !strings.Contains(v.Message, want) {
			t.Errorf("message %q lacks %q", v.Message, want)
		}
	}
	if strings.Join(v.Objects, " ") != "BootcNodePool/p Node/a" {
		t.Errorf("objects %v", v.Objects)
	}
	// Off, it records nothing.
	sc := &scenario.Scenario{Name: "test", Expect: scenario.Expect{Invariants: []scenario.Invariant{scenario.InvMaxUnavailable}}}
	g := newFixture(t, sc, intstr.FromInt32(1), "a")
	g.setPool(func(p *v1alpha1.BootcNodePool) {
		p.Spec.Windows = []v1alpha1.MaintenanceWindow{window("01:00", 30*time.Minute)}
		p.Status.Slots = []v1alpha1.Slot{{Node: "a", Image: imgB, Since: metav1.NewTime(t0.Add(5 * time.Minute))}}
	})
	if n := g.count(scenario.InvGrantInWindow); n != 0 {
		t.Errorf("grant-in-window not enabled: %d violation(s)", n)
	}
}
