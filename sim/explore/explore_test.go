package explore

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/rollout"
	"github.com/bootroll/bootroll/sim/scenario"
	"github.com/bootroll/bootroll/sim/twin"
)

func shipped(t *testing.T) []Target {
	t.Helper()
	files, err := filepath.Glob("../../scenarios/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no shipped scenarios: %v", err)
	}
	var out []Target
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Target{File: f, Data: data})
	}
	return out
}

func target(t *testing.T, name string, sets ...string) Target {
	t.Helper()
	file := "../../scenarios/" + name + ".yaml"
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) > 0 {
		if data, err = scenario.ApplySets(file, data, sets); err != nil {
			t.Fatal(err)
		}
	}
	return Target{File: file, Data: data}
}

// Every generator's items, drawn many times over every shipped scenario,
// render into scenario files that the ordinary loader accepts, with the
// entries added, the timing expectations and negative controls gone.
func TestEveryDrawnScheduleLoads(t *testing.T) {
	drawnKeys := map[string]bool{}
	for i, tg := range shipped(t) {
		sc, err := scenario.Parse(tg.File, tg.Data)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := parseDocument(tg.File, tg.Data)
		if err != nil {
			t.Fatal(err)
		}
		w := newWorld(sc, doc, 20*time.Minute)
		for seed := range uint64(40) {
			// Each scenario its own stream: the same 40 seeds everywhere
			// would draw the same few schedules.
			s := draw(w, AllCategories, rand.New(rand.NewPCG(seed, 7+uint64(i))))
			entries := 0
			for _, it := range s {
				for _, e := range it.Entries {
					drawnKeys[e.Key] = true
					if e.Section != Setting {
						entries++
					}
				}
			}
			data, err := doc.render(variant{seed: seed + 1, schedule: s, limit: limitFor(sc, s)})
			if err != nil {
				t.Fatal(err)
			}
			got, err := scenario.Parse(tg.File, data)
			if err != nil {
				t.Fatalf("%s seed %d: drawn schedule %v does not load:\n%v\n%s", tg.File, seed, s, err, data)
			}
			if n := len(got.Events) + len(got.Faults) - len(sc.Events) - len(sc.Faults); n != entries {
				t.Fatalf("%s seed %d: %d entries added, want %d", tg.File, seed, n, entries)
			}
			if len(got.NegativeControls) != 0 || got.Expect.CompletesWithin != nil || len(got.Expect.FinalImages) != 0 {
				t.Fatalf("%s: variant keeps negative controls or timing expectations", tg.File)
			}
			if !slices.Equal(got.Expect.Invariants, sc.Expect.Invariants) {
				t.Fatalf("%s: variant invariants %v, want %v", tg.File, got.Expect.Invariants, sc.Expect.Invariants)
			}
			if got.Seed != seed+1 {
				t.Fatalf("%s: variant seed %d, want %d", tg.File, got.Seed, seed+1)
			}
		}
	}
	for _, g := range generators {
		if !drawnKeys[g.name] && !drawnKeys[g.key] {
			t.Errorf("generator %s never drawn over the shipped scenarios", g.name)
		}
	}
}

// The report does not depend on --jobs.
func TestJobsDoNotChangeResults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the twin 60 times")
	}
	tgs := []Target{target(t, "plain-rollout-10"), target(t, "pdb-blocks-drain")}
	run := func(jobs int) *Report {
		rep, err := Run(tgs, Config{Seeds: 15, Categories: AllCategories, Jobs: jobs, ShrinkRuns: -1})
		if err != nil {
			t.Fatal(err)
		}
		for i := range rep.Scenarios {
			rep.Scenarios[i].Wall = 0
		}
		rep.Wall, rep.RunWall = 0, 0
		return rep
	}
	a, b := run(1), run(3)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("jobs 1 and 3 differ:\n%+v\n%+v", a, b)
	}
	if a.Runs != 30 {
		t.Fatalf("runs %d, want 30", a.Runs)
	}
}

// A planted bug (slots handed out without counting) is found, written as a
// reproducer that replays to the same violation, and shrunk: it needs no
// fault, so every drawn item goes and the nodes are cut.
func TestPlantedBugIsWrittenAndShrunk(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the twin")
	}
	out := t.TempDir()
	tg := target(t, "plain-rollout-10", "bootroll.testOnly.ignoreSlotLimit=true")
	rep, err := Run([]Target{tg}, Config{Seeds: 3, FirstSeed: 4, Categories: []Category{Crash, Human}, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	var f *Failure
	for i := range rep.Failures {
		if rep.Failures[i].Invariant == string(scenario.InvMaxUnavailable) {
			f = &rep.Failures[i]
		}
	}
	if f == nil {
		t.Fatalf("max-unavailable not found: %+v", rep.Failures)
	}
	if rep.Scenarios[0].Violations["max-unavailable"] != 3 {
		t.Fatalf("violations %v, want max-unavailable in all 3 runs", rep.Scenarios[0].Violations)
	}
	if len(f.Shrunk) != 0 {
		t.Fatalf("shrunk schedule %v, want empty (the bug needs no fault)", f.Shrunk)
	}
	for _, file := range []string{f.FullFile, f.ShrunkFile} {
		sc, err := scenario.Load(file)
		if err != nil {
			t.Fatalf("reproducer %s does not load: %v", file, err)
		}
		res, err := twin.Run(sc, twin.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Caught(f.Invariant) {
			t.Fatalf("reproducer %s does not replay the violation: %v", file, res.Violations)
		}
		data, _ := os.ReadFile(file)
		if !strings.Contains(string(data), "# Replay: bootroll scenario run "+file) {
			t.Fatalf("reproducer %s has no replay line:\n%s", file, data)
		}
	}
	shrunk, _ := scenario.Load(f.ShrunkFile)
	if shrunk.NodeGroups[0].Count >= 10 {
		t.Fatalf("shrunk reproducer keeps %d nodes; the bug shows with fewer", shrunk.NodeGroups[0].Count)
	}
}

func TestParseCategories(t *testing.T) {
	got, err := ParseCategories("crash, human,crash")
	if err != nil || !slices.Equal(got, []Category{Crash, Human}) {
		t.Fatalf("got %v %v", got, err)
	}
	if got, _ := ParseCategories("all"); !slices.Equal(got, AllCategories) {
		t.Fatalf("all: %v", got)
	}
	if _, err := ParseCategories("crash,bogus"); err == nil || !strings.Contains(err.Error(), `"bogus"`) {
		t.Fatalf("bogus: %v", err)
	}
}

// A maintenance window a drawn setPool gives opens within an hour of the
// edit, and the item's End reaches past its opening, so the run's limit
// (limitFor) leaves the rollout time after it: a window that opened only
// after the limit stalled the rollout by design and was reported as a
// converges violation (explorer seed 70188 of cluster-static-rollout-3).
func TestWindowOpeningWithinLimit(t *testing.T) {
	tg := target(t, "plain-rollout-10")
	sc, err := scenario.Parse(tg.File, tg.Data)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(sc, nil, 20*time.Minute)
	var gen generator
	for _, g := range generators {
		if g.name == "setPool" {
			gen = g
		}
	}
	windows := 0
	for seed := range uint64(400) {
		it, ok := gen.draw(w, rand.New(rand.NewPCG(seed, 3)))
		if !ok {
			continue
		}
		e := it.Entries[0]
		ws, _ := e.Body["windows"].([]any)
		if len(ws) == 0 {
			continue
		}
		windows++
		hm := ws[0].(map[string]any)["start"].(string)
		clock, err := time.Parse("15:04", hm)
		if err != nil {
			t.Fatal(err)
		}
		day := sc.Start.UTC().Truncate(24 * time.Hour)
		open := day.Add(time.Duration(clock.Hour())*time.Hour + time.Duration(clock.Minute())*time.Minute)
		for open.Before(sc.Start.Add(e.At)) {
			open = open.Add(24 * time.Hour)
		}
		if opens := open.Sub(sc.Start); it.End() < opens || opens > e.At+time.Hour+time.Minute {
			t.Errorf("seed %d: window %s opens at %s, edit at %s, item ends at %s", seed, hm, opens, e.At, it.End())
		}
	}
	if windows == 0 {
		t.Fatal("no setPool with a window drawn")
	}
}

// A run gets at least RecoveryFloor after its last item, whatever its
// scenario's limit, so that a failure is judged before the end.
func TestLimitCoversTimeouts(t *testing.T) {
	s := Schedule{one(Host, Faults, time.Minute, "bootFailure", map[string]any{"node": "a-0", "mode": "NeverReady"})}
	short := &scenario.Scenario{Limit: 4 * time.Minute}
	if got := limitFor(short, s); got < time.Minute+15*time.Minute+10*time.Minute {
		t.Errorf("limit %s after a boot failure at 1m of a 4m scenario: shorter than the default health and drain timeouts", got)
	}
	long := &scenario.Scenario{Limit: 2 * time.Hour}
	if got := limitFor(long, s); got != time.Minute+2*time.Hour {
		t.Errorf("limit %s for a 2h scenario, want 2h1m", got)
	}
	// A scenario's own long timeouts and reboots (explorer seed 95052 of
	// cluster-repair-during-slow-reboot): a 30m healthTimeout and 12m
	// reboots need 30m+10m+2×12m after the last item.
	slow := &scenario.Scenario{Limit: 17 * time.Minute}
	slow.Host.Reboot = scenario.Distribution{Dist: scenario.DistFixed, Value: 12 * time.Minute}
	slow.Bootroll.Pools = []scenario.Pool{{HealthTimeout: &metav1.Duration{Duration: 30 * time.Minute}}}
	if got, want := limitFor(slow, s), time.Minute+30*time.Minute+10*time.Minute+24*time.Minute; got != want {
		t.Errorf("limit %s for a scenario with healthTimeout 30m and 12m reboots, want %s", got, want)
	}
}

// The limit leaves the pools time to roll every node once more after the
// last item, the nodes added included (explorer seed 148051 of
// cluster-repair-during-slow-reboot: a pool flipped to v1 and back to v2
// at 12m21s, its one node mid-reboot into v1 and four nodes added; five
// 12-minute reboots, one at a time, after that one, and the limit cut off
// the last at 1h16m21s, where the reboots alone end at 1h24m21s).
func TestLimitCoversTheRolloutAfterTheLastItem(t *testing.T) {
	tg := target(t, "cluster/repair-during-slow-reboot")
	sc, err := scenario.Parse(tg.File, tg.Data)
	if err != nil {
		t.Fatal(err)
	}
	s := Schedule{
		one(Human, Events, 3*time.Minute, "addNodes", map[string]any{"group": "kp", "count": 2}),
		one(Human, Events, 7*time.Minute, "addNodes", map[string]any{"group": "kp", "count": 2}),
		one(Human, Events, 11*time.Minute, "setPoolImage", map[string]any{"pool": "kp", "image": "v1"}),
		one(Human, Events, 12*time.Minute+21*time.Second, "setPoolImage", map[string]any{"pool": "kp", "image": "v2"}),
	}
	reboot := upperBound(sc.Host.Reboot)
	if need := s.End() + reboot + 5*reboot; limitFor(sc, s) < need {
		t.Errorf("limit %s: shorter than the reboot under way at the last item and five more, one at a time (%s)", limitFor(sc, s), need)
	}
	// Every node of every group counts (the spare node too: a bound,
	// not a schedule): six turns.
	if got := rolloutTime(sc, s); got != 6*(reboot+RolloutSlack) {
		t.Errorf("rolloutTime %s for six nodes one at a time, want %s", got, 6*(reboot+RolloutSlack))
	}
}

// A limit never ends a run inside a maintenance window a pool may have:
// it moves to the window's close (explorer seed 176753 of the 176713
// regression: an addNodes at 12h08m gave a limit of 25h04m17.532s, 9
// minutes into the next day's 00:55 window of 2h26m4s that a setPool
// event of the scenario gave the pool, and converges judged a pool rolling
// out in its window). Windows from the schedule's setPools count too.
func TestLimitEndsOutsideMaintenanceWindows(t *testing.T) {
	tg := target(t, "regressions/rollout-100-nodes-api-outage-slot-take-up.converges.seed176713")
	sc, err := scenario.Parse(tg.File, tg.Data)
	if err != nil {
		t.Fatal(err)
	}
	s := Schedule{one(Human, Events, 12*time.Hour+8*time.Minute, "addNodes", map[string]any{"group": "workers", "count": 1})}
	closes := 24*time.Hour + 55*time.Minute + 2*time.Hour + 26*time.Minute + 4*time.Second
	ws := poolWindows(sc, s)
	if got := outsideWindows(sc.Start, ws, 25*time.Hour+4*time.Minute+17532*time.Millisecond); got != closes {
		t.Errorf("limit %s, want the close of the day-2 window at %s", got, closes)
	}
	if limit := limitFor(sc, s); inWindow(sc.Start, ws, limit) {
		t.Errorf("limit %s inside a window", limit)
	}
	// Without the window (and the event's maxUnavailable 1), the limit
	// is where it was.
	sc.Events = slices.DeleteFunc(slices.Clone(sc.Events), func(e scenario.Event) bool { return e.SetPool != nil && e.SetPool.Windows != nil })
	if got, want := limitFor(sc, s), 12*time.Hour+8*time.Minute+sc.Limit; got != want {
		t.Errorf("limit %s without windows, want %s", got, want)
	}
	// A window a schedule's setPool draws moves it too, and a limit
	// outside every window stays.
	at := func(hm string, d time.Duration) Item {
		return one(Human, Events, 2*time.Hour, "setPool", map[string]any{"pool": "workers", "windows": []any{map[string]any{"start": hm, "duration": d.String()}}})
	}
	if got, want := outsideWindows(sc.Start, poolWindows(sc, append(s, at("00:55", 3*time.Hour))), 25*time.Hour), 27*time.Hour+55*time.Minute; got != want {
		t.Errorf("limit %s with a drawn 00:55 window of 3h, want %s", got, want)
	}
	if got, want := outsideWindows(sc.Start, poolWindows(sc, append(s, at("04:00", time.Hour))), 25*time.Hour), 25*time.Hour; got != want {
		t.Errorf("limit %s with a drawn window that does not hold it, want %s", got, want)
	}
	for _, w := range []Item{at("00:55", 3*time.Hour), at("04:00", time.Hour)} {
		s := append(slices.Clone(s), w)
		if limit := limitFor(sc, s); inWindow(sc.Start, poolWindows(sc, s), limit) {
			t.Errorf("limit %s inside a window drawn by %v", limit, w.Entries[0].Body)
		}
	}
}

func inWindow(start time.Time, ws []v1alpha1.MaintenanceWindow, limit time.Duration) bool {
	_, in := rollout.WindowClose(ws, start.Add(limit))
	return in
}

// A rollout that may only take its turns inside a maintenance window
// gets whole periods of the window, at the fewest slots the scenario or
// the schedule gives the pool (explorer seed 177039 of the 176713
// regression: the scenario's setPool gives maxUnavailable 1 and a daily
// 2h26m window, the schedule sends the pool back to v1 at 11h29m, the
// pool waits for the next day's window and rolls back 82 nodes in it, and
// converges at 48h57m28s, in the window after; the limit was 27h21m4s,
// ten turns of the base 10% in wall time).
func TestLimitWaitsForWindows(t *testing.T) {
	tg := target(t, "regressions/rollout-100-nodes-api-outage-slot-take-up.converges.seed176713")
	sc, err := scenario.Parse(tg.File, tg.Data)
	if err != nil {
		t.Fatal(err)
	}
	s := Schedule{one(Human, Events, 11*time.Hour+29*time.Minute, "setPoolImage", map[string]any{"pool": "workers", "image": "v1"})}
	if got, converged := limitFor(sc, s), 48*time.Hour+57*time.Minute+28*time.Second; got < converged {
		t.Errorf("limit %s, before the roll back converges at %s", got, converged)
	}
	// A hundred turns of 8m (the 6m reboot and RolloutSlack) in a daily
	// window of 2h26m4s: six windows and the wait for the first.
	window := []v1alpha1.MaintenanceWindow{{Start: "00:55", Duration: metav1.Duration{Duration: 2*time.Hour + 26*time.Minute + 4*time.Second}}}
	if got, want := windowedTime(800*time.Minute, window), 7*24*time.Hour; got != want {
		t.Errorf("windowedTime %s, want %s", got, want)
	}
	// A window on Mondays and Thursdays opens at most four days apart.
	window[0].Days = []v1alpha1.Weekday{"Thu", "Mon"}
	if got, want := windowedTime(800*time.Minute, window), 7*4*24*time.Hour; got != want {
		t.Errorf("windowedTime %s on Mon and Thu, want %s", got, want)
	}
	if got := windowedTime(800*time.Minute, nil); got != 800*time.Minute {
		t.Errorf("windowedTime %s without windows, want the work itself", got)
	}
	// A drawn setPool's maxUnavailable lowers the slots too.
	sc.Events = nil
	base := rolloutTime(sc, s)
	s = append(s, one(Human, Events, time.Hour, "setPool", map[string]any{"pool": "workers", "maxUnavailable": 1}))
	if got := rolloutTime(sc, s); got != 10*base {
		t.Errorf("rolloutTime %s with a drawn maxUnavailable 1, want ten times the 10%% pool's %s", got, base)
	}
}

// A drawn apiErrors fault always fails something: one whose verbs are
// all reads gets a code besides conflict, which fails writes only (the
// scenario refuses a fault that would fail nothing).
func TestDrawnAPIFaultFailsSomething(t *testing.T) {
	tg := target(t, "plain-rollout-10")
	sc, err := scenario.Parse(tg.File, tg.Data)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(sc, nil, 20*time.Minute)
	gen := generators[slices.IndexFunc(generators, func(g generator) bool { return g.name == "apiErrors" })]
	readsOnly := 0
	for seed := range uint64(20000) {
		it, _ := gen.draw(w, rand.New(rand.NewPCG(seed, 5)))
		body := it.Entries[0].Body
		verbs, codes := body["verbs"].([]string), body["codes"].([]string)
		if slices.ContainsFunc(verbs, func(v string) bool { return v != "get" && v != "list" }) {
			continue
		}
		readsOnly++
		if !slices.ContainsFunc(codes, func(c string) bool { return c != "conflict" }) {
			t.Fatalf("seed %d: verbs %v with codes %v fail nothing", seed, verbs, codes)
		}
	}
	if readsOnly < 50 {
		t.Errorf("only %d of 20000 draws had reads-only verbs; the test looks at too few", readsOnly)
	}
}
