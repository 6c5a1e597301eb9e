package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func TestEventOrder(t *testing.T) {
	e := New(t0, 1)
	var got []string
	add := func(d time.Duration, name string) {
		e.After(d, name, func() { got = append(got, name) })
	}
	add(2*time.Second, "c")
	add(time.Second, "a")
	add(2*time.Second, "d")
	add(time.Second, "b")
	add(0, "now")
	cancelled := e.After(time.Second, "cancelled", func() { got = append(got, "cancelled") })
	if !cancelled.Cancel() {
		t.Fatal("Cancel of a pending event = false, want true")
	}
	if cancelled.Cancel() {
		t.Fatal("second Cancel = true, want false")
	}
	e.Run()
	want := []string{"now", "a", "b", "c", "d"}
	if !slices.Equal(got, want) {
		t.Fatalf("order = %v, want %v", got, want)
	}
	if e.EventsRun() != 5 {
		t.Errorf("EventsRun = %d, want 5", e.EventsRun())
	}
	if !e.Now().Equal(t0.Add(2 * time.Second)) {
		t.Errorf("Now = %v, want %v", e.Now(), t0.Add(2*time.Second))
	}
}

func TestEventScheduledFromEvent(t *testing.T) {
	e := New(t0, 1)
	var got []string
	e.After(time.Second, "outer", func() {
		got = append(got, "outer")
		e.After(0, "same-time", func() { got = append(got, "same-time") })
		e.At(t0, "past", func() { got = append(got, "past@"+e.Now().Sub(t0).String()) })
	})
	e.After(time.Second, "sibling", func() { got = append(got, "sibling") })
	e.Run()
	want := []string{"outer", "sibling", "same-time", "past@1s"}
	if !slices.Equal(got, want) {
		t.Fatalf("order = %v, want %v", got, want)
	}
}

func TestRunUntilAndStop(t *testing.T) {
	e := New(t0, 1)
	var names []string
	e.OnEvent(func(name string) {
		names = append(names, name)
		if name == "stop" {
			e.Stop()
		}
	})
	e.After(time.Second, "a", func() {})
	e.After(3*time.Second, "stop", func() {})
	e.After(4*time.Second, "never", func() {})

	e.RunUntil(t0.Add(2 * time.Second))
	if got, want := e.Now(), t0.Add(2*time.Second); !got.Equal(want) {
		t.Errorf("after RunUntil, Now = %v, want %v", got, want)
	}
	if got, want := e.Pending(), 2; got != want {
		t.Errorf("Pending = %d, want %d", got, want)
	}
	e.RunUntil(t0.Add(time.Hour))
	if !e.Stopped() {
		t.Fatal("Stopped = false after a hook called Stop")
	}
	if got, want := e.Now(), t0.Add(3*time.Second); !got.Equal(want) {
		t.Errorf("after Stop, Now = %v, want %v", got, want)
	}
	if e.Step() {
		t.Error("Step after Stop = true, want false")
	}
	if want := []string{"a", "stop"}; !slices.Equal(names, want) {
		t.Errorf("hook saw %v, want %v", names, want)
	}
}

func TestRandIsSeeded(t *testing.T) {
	draw := func(seed uint64) []uint64 {
		r := New(t0, seed).Rand()
		var out []uint64
		for range 8 {
			out = append(out, r.Uint64())
		}
		return out
	}
	if a, b := draw(42), draw(42); !slices.Equal(a, b) {
		t.Errorf("seed 42 drew %v then %v, want equal", a, b)
	}
	if a, b := draw(42), draw(43); slices.Equal(a, b) {
		t.Errorf("seeds 42 and 43 drew the same %v", a)
	}
}

func TestClock(t *testing.T) {
	e := New(t0, 1)
	c := e.Clock()
	e.RunUntil(t0.Add(time.Minute))
	if got := c.Now(); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("Now = %v, want %v", got, t0.Add(time.Minute))
	}
	if got := c.Since(t0); got != time.Minute {
		t.Errorf("Since = %v, want 1m", got)
	}
	for name, f := range map[string]func(){
		"After":     func() { c.After(time.Second) },
		"NewTimer":  func() { c.NewTimer(time.Second) },
		"Sleep":     func() { c.Sleep(time.Second) },
		"Tick":      func() { c.Tick(time.Second) },
		"NewTicker": func() { c.NewTicker(time.Second) },
		"AfterFunc": func() { c.AfterFunc(time.Second, func() {}) },
	} {
		func() {
			defer func() {
				if got := recover(); got != timersUnsupported {
					t.Errorf("%s panicked with %v, want %q", name, got, timersUnsupported)
				}
			}()
			f()
		}()
	}
}

// Many events at random times, some cancelled before they run and some
// scheduled by events, run in (time, scheduling order) order: the order
// of a sorted list of what is pending, whatever the heap's layout.
func TestEventOrderRandomised(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	e := New(t0, 1)
	type ev struct {
		at  time.Time
		seq int
		h   *Handle
	}
	var pending []*ev
	seq := 0
	var got, want []int
	var schedule func(d time.Duration)
	schedule = func(d time.Duration) {
		x := &ev{at: e.Now().Add(d), seq: seq}
		seq++
		x.h = e.After(d, "ev", func() {
			got = append(got, x.seq)
			if rng.IntN(4) == 0 {
				schedule(time.Duration(rng.IntN(5)) * time.Second)
			}
		})
		pending = append(pending, x)
	}
	for range 2000 {
		schedule(time.Duration(rng.IntN(300)) * time.Second)
	}
	for _, x := range pending {
		if rng.IntN(5) == 0 && x.h.Cancel() {
			x.h = nil
		}
	}
	// The model: run the earliest (at, seq) pending event, which may
	// schedule more, until none is left.
	model := slices.Clone(pending)
	e.Run()
	for _, x := range pending[len(model):] {
		model = append(model, x)
	}
	for _, x := range model {
		if x.h != nil {
			want = append(want, x.seq)
		}
	}
	slices.SortStableFunc(want, func(a, b int) int {
		xa, xb := pending[a], pending[b]
		if c := xa.at.Compare(xb.at); c != 0 {
			return c
		}
		return xa.seq - xb.seq
	})
	if !slices.Equal(got, want) {
		t.Fatalf("ran %d events, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
	if e.Pending() != 0 {
		t.Errorf("Pending = %d after Run, want 0", e.Pending())
	}
}

func firstDiff(a, b []int) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// Events scheduled for the current instant (the engine's soon list) run
// in scheduling order after the events of that instant scheduled before
// them, count as pending until they run, and can be cancelled.
func TestEventsAtNow(t *testing.T) {
	e := New(t0, 1)
	var got []string
	run := func(name string) func() { return func() { got = append(got, name) } }
	var x, y *Handle
	e.After(time.Second, "first", func() {
		got = append(got, "first")
		x = e.After(0, "x", run("x"))
		y = e.At(t0, "y", run("y")) // in the past: runs now
		e.After(0, "z", func() {
			got = append(got, "z")
			e.After(0, "z2", run("z2"))
		})
		if !x.Pending() || !y.Pending() {
			t.Error("an event at now is not Pending")
		}
		if n := e.Pending(); n != 5 { // x, y, z, second, later
			t.Errorf("Pending = %d, want 5", n)
		}
		if !x.Cancel() || x.Pending() || x.Cancel() {
			t.Error("Cancel of an event at now: want true once, then not pending")
		}
		if n := e.Pending(); n != 4 {
			t.Errorf("Pending after a Cancel = %d, want 4", n)
		}
	})
	e.After(time.Second, "second", run("second"))
	e.After(2*time.Second, "later", run("later"))
	e.RunUntil(t0.Add(time.Second))
	want := []string{"first", "second", "y", "z", "z2"}
	if !slices.Equal(got, want) {
		t.Fatalf("order = %v, want %v", got, want)
	}
	if y.Pending() {
		t.Error("an event that ran is Pending")
	}
	if n := e.Pending(); n != 1 {
		t.Errorf("Pending = %d, want 1 (later)", n)
	}
	if !e.Now().Equal(t0.Add(time.Second)) {
		t.Errorf("Now = %v, want %v", e.Now(), t0.Add(time.Second))
	}
	// A cancelled event at now is the last one at now: the next event
	// is the heap's.
	e.After(0, "cancelled", run("cancelled")).Cancel()
	e.Run()
	if want := append(want, "later"); !slices.Equal(got, want) {
		t.Fatalf("order = %v, want %v", got, want)
	}
	if e.EventsRun() != 6 {
		t.Errorf("EventsRun = %d, want 6", e.EventsRun())
	}
}

// A Handle scheduled again once its event ran or was cancelled
// (Engine.schedule, as a work queue's keys do) runs its new event once,
// and the hooks see the name of the event that ran.
func TestHandleReuse(t *testing.T) {
	e := New(t0, 1)
	var got, hooked []string
	e.OnEvent(func(name string) { hooked = append(hooked, name) })
	var h Handle
	run := func(name string) func() { return func() { got = append(got, name) } }
	e.schedule(&h, t0, "a", func() {
		got = append(got, "a")
		// Its own event has run: the Handle takes the next one.
		e.schedule(&h, t0.Add(time.Second), "b", run("b"))
	})
	e.After(0, "other", run("other"))
	e.RunUntil(t0)
	if !h.Pending() || h.Name() != "b" {
		t.Fatalf("after a: Pending = %v, Name = %q; want b pending", h.Pending(), h.Name())
	}
	// Cancelled in the heap, then at now (soon), then reused at now:
	// the cancelled events leave nothing behind.
	h.Cancel()
	e.schedule(&h, t0, "c", run("c"))
	h.Cancel()
	e.schedule(&h, t0, "d", run("d"))
	e.After(0, "e", run("e"))
	func() {
		defer func() {
			if recover() == nil {
				t.Error("scheduling a pending event's Handle did not panic")
			}
		}()
		e.schedule(&h, t0, "pending", run("pending"))
	}()
	if n := e.Pending(); n != 2 {
		t.Errorf("Pending = %d, want 2 (d, e)", n)
	}
	e.Run()
	if want := []string{"a", "other", "d", "e"}; !slices.Equal(got, want) {
		t.Errorf("ran %v, want %v", got, want)
	}
	if want := []string{"a", "other", "d", "e"}; !slices.Equal(hooked, want) {
		t.Errorf("hooks saw %v, want %v", hooked, want)
	}
}
