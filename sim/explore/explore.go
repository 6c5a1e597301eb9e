package explore

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/rollout"
	"github.com/bootroll/bootroll/internal/parallel"
	"github.com/bootroll/bootroll/sim/scenario"
	"github.com/bootroll/bootroll/sim/twin"
)

// Config says what to explore.
type Config struct {
	// Seeds is how many runs (seeds) each scenario gets; FirstSeed is the
	// first seed (default 1).
	Seeds     int
	FirstSeed uint64
	// Categories are the fault and action families drawn from.
	Categories []Category
	// Jobs runs that many runs at once (default 1). Results do not depend
	// on it, except where UntilFailure or Budget stop early.
	Jobs int
	// UntilFailure stops after the first run that violates something.
	UntilFailure bool
	// Budget stops starting new runs after this much wall time; 0: none.
	Budget time.Duration
	// ShrinkRuns bounds the runs one shrink may make (default 150); a
	// negative value turns shrinking off.
	ShrinkRuns int
	// Out is the directory the reproducers are written to; "" writes none.
	Out string
	// Now reads the wall clock, for the budget and the wall times reported
	// (the twin never reads it). Nil: time.Now.
	Now func() time.Time
}

// Target is a scenario file to explore.
type Target struct {
	File string
	Data []byte
}

// ScenarioReport is one scenario's line of the table.
type ScenarioReport struct {
	Name, File string
	Runs       int
	// Violations counts, per invariant, the runs that violated it.
	Violations map[string]int
	// Errors counts runs the twin could not make (a generator or model bug).
	Errors int
	// Sim is the virtual time simulated, Wall the wall time spent
	// (summed over jobs).
	Sim, Wall time.Duration
}

// Failure is one invariant violated in a scenario, with its reproducers.
type Failure struct {
	Scenario, File string
	Seed           uint64
	Invariant      string
	Message        string
	// Schedule is what the run drew; Shrunk what is left after shrinking,
	// with Nodes the nodes left per group.
	Schedule, Shrunk Schedule
	ShrinkRuns       int
	// FullFile and ShrunkFile are the reproducers written ("" when Out is
	// empty).
	FullFile, ShrunkFile string
	// Err is a run error instead of a violation.
	Err string
}

// Report is what an exploration found.
type Report struct {
	Scenarios []ScenarioReport
	Failures  []Failure
	Runs      int
	Sim       time.Duration
	// Wall is the elapsed wall time; RunWall the wall time of the runs
	// summed over jobs (per-core throughput is Runs / RunWall).
	Wall, RunWall time.Duration
	// Stopped says why it stopped early, or "".
	Stopped string
}

// prepared is a target loaded and measured.
type prepared struct {
	doc     *document
	sc      *scenario.Scenario
	horizon time.Duration
}

type runOut struct {
	res  *twin.Result
	err  error
	wall time.Duration
	v    variant
}

// Run explores the targets.
func Run(targets []Target, cfg Config) (*Report, error) {
	if cfg.Seeds < 1 {
		return nil, fmt.Errorf("--seeds: want at least 1, got %d", cfg.Seeds)
	}
	if cfg.FirstSeed == 0 {
		cfg.FirstSeed = 1
	}
	if cfg.Jobs < 1 {
		cfg.Jobs = 1
	}
	if cfg.ShrinkRuns == 0 {
		cfg.ShrinkRuns = 150
	}
	if cfg.Now == nil {
		cfg.Now = time.Now // edge: wall clock of the outer loop, never read by the twin
	}
	began := cfg.Now()
	preps := make([]prepared, len(targets))
	for i, t := range targets {
		p, err := prepare(t, cfg)
		if err != nil {
			return nil, err
		}
		preps[i] = p
	}
	rep := &Report{Scenarios: make([]ScenarioReport, len(targets))}
	for i, p := range preps {
		rep.Scenarios[i] = ScenarioReport{Name: p.sc.Name, File: p.doc.file, Violations: map[string]int{}}
	}

	// Every (scenario, seed) is a task; results go to their own slot, so
	// the report does not depend on the order the jobs finish in.
	type task struct{ ti, k int }
	var tasks []task
	for k := range cfg.Seeds {
		for ti := range preps {
			tasks = append(tasks, task{ti, k})
		}
	}
	outs := make([]runOut, len(tasks))
	done := make([]bool, len(tasks))
	var mu sync.Mutex
	stop := ""
	parallel.For(cfg.Jobs, len(tasks), func(i int) { // edge: independent twin runs in parallel, one engine each
		mu.Lock()
		halt := stop != ""
		if !halt && cfg.Budget > 0 && cfg.Now().Sub(began) >= cfg.Budget {
			stop = fmt.Sprintf("budget %s spent", cfg.Budget)
			halt = true
		}
		mu.Unlock()
		if halt {
			return
		}
		t := tasks[i]
		seed := cfg.FirstSeed + uint64(t.k)
		p := preps[t.ti]
		out := runSeed(p, seed, cfg)
		mu.Lock()
		outs[i], done[i] = out, true
		if cfg.UntilFailure && (out.err != nil || !out.res.Passed()) && stop == "" {
			stop = "--until-failure: a run failed"
		}
		mu.Unlock()
	})
	rep.Stopped = stop

	type key struct {
		ti  int
		inv string
	}
	first := map[key]int{}
	var keys []key
	for i, t := range tasks {
		if !done[i] {
			continue
		}
		o := outs[i]
		sr := &rep.Scenarios[t.ti]
		sr.Runs++
		rep.Runs++
		sr.Wall += o.wall
		rep.RunWall += o.wall
		if o.err != nil {
			sr.Errors++
			k := key{t.ti, "error"}
			if _, ok := first[k]; !ok {
				first[k] = i
				keys = append(keys, k)
			}
			continue
		}
		sr.Sim += o.res.End
		rep.Sim += o.res.End
		for _, inv := range slices.Sorted(maps.Keys(o.res.Counts)) {
			sr.Violations[inv]++
			k := key{t.ti, inv}
			if _, ok := first[k]; !ok {
				first[k] = i
				keys = append(keys, k)
			}
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.ti != b.ti {
			return a.ti - b.ti
		}
		return strings.Compare(a.inv, b.inv)
	})

	// Each scenario's first run per violated invariant is written and
	// shrunk.
	rep.Failures = make([]Failure, len(keys))
	parallel.For(cfg.Jobs, len(keys), func(j int) { // edge: independent shrinks in parallel
		k := keys[j]
		i := first[k]
		p := preps[k.ti]
		rep.Failures[j] = failure(p, outs[i], k.inv, cfg)
	})
	rep.Wall = cfg.Now().Sub(began)
	return rep, nil
}

func nameHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// RecoveryFloor is the least time a run gets after its last item: a
// fault that makes a node fail is only judged when the pool's timeouts
// run out (healthTimeout 15m and drainTimeout 10m by default, up to 20m
// and 15m as setPool draws them), and a run whose scenario limit is
// shorter (the cluster variants' few minutes) ended before the verdict
// and was reported as not converging (explorer seeds 70062, 70052, 70053,
// 70028). A run that converges stops early, so only stalled runs pay.
const RecoveryFloor = 35 * time.Minute

// limitFor gives a run the scenario's limit, and at least RecoveryFloor,
// and the scenario's own judgeTime followed by rolloutTime, after its last
// item ends, so the world has as long to recover from the schedule as the
// scenario gives it to finish, the controller's timeouts need to judge
// what failed and the pools need to roll every node once more.
//
// A limit that falls inside a maintenance window a pool may have is moved
// to the window's close: the judge cannot tell a rollout cut off in the
// middle of its window from one stalled there, and converges excuses a
// pool whose closed window left it work only once that window is over
// (explorer seed 176753 of the 176713 regression: the limit, 25h04m after
// an addNodes at 12h08m, ended the run 9 minutes into the next day's
// 2h26m window, the pool rolling out in it one node at a time, 92/101).
func limitFor(sc *scenario.Scenario, s Schedule) time.Duration {
	limit := max(sc.Limit, s.End()+max(sc.Limit, RecoveryFloor, judgeTime(sc)+rolloutTime(sc, s)))
	return outsideWindows(sc.Start, poolWindows(sc, s), limit)
}

// MaxWindowMoves bounds how many times outsideWindows moves a limit to a
// window's close: windows last at most 24h, so a limit moved this often
// is past a week of back-to-back windows.
const MaxWindowMoves = 8

// outsideWindows moves limit (from start) to the close of the windows
// that hold it, again while the close falls in another window.
func outsideWindows(start time.Time, ws []v1alpha1.MaintenanceWindow, limit time.Duration) time.Duration {
	for range MaxWindowMoves {
		closes, in := rollout.WindowClose(ws, start.Add(limit))
		if !in {
			break
		}
		limit = closes.Sub(start)
	}
	return limit
}

// poolWindows lists every maintenance window a pool of the run may have:
// the scenario's pools', its setPool events' and the schedule's setPools'
// (whichever is in force at the limit; one that is not only lengthens
// the run).
func poolWindows(sc *scenario.Scenario, s Schedule) []v1alpha1.MaintenanceWindow {
	var ws []v1alpha1.MaintenanceWindow
	for _, p := range sc.Bootroll.Pools {
		ws = append(ws, p.Windows...)
	}
	for _, e := range sc.Events {
		if e.SetPool != nil && e.SetPool.Windows != nil {
			ws = append(ws, *e.SetPool.Windows...)
		}
	}
	for _, it := range s {
		for _, e := range it.Entries {
			list, _ := e.Body["windows"].([]any)
			for _, w := range list {
				m, _ := w.(map[string]any)
				start, _ := m["start"].(string)
				d, _ := m["duration"].(string)
				if dur, err := time.ParseDuration(d); err == nil && e.Key == "setPool" {
					ws = append(ws, v1alpha1.MaintenanceWindow{Start: start, Duration: metav1.Duration{Duration: dur}})
				}
			}
		}
	}
	return ws
}

// RolloutSlack is what rolloutTime allows each slot's turn beyond a
// reboot: the drain of a node no budget holds up, the verification, the
// pool's pass that grants the next slot, and a stage that did not finish
// beside the slots.
const RolloutSlack = 2 * time.Minute

// rolloutTime is how long the pools may take to send every node through
// its slot once more after the last item: a setPoolImage sends them all
// again, addNodes adds nodes to roll, and the slots (maxUnavailable over
// all the nodes, at least one) take them in turns of a reboot's upper
// bound and RolloutSlack. Explorer seed 148051 of
// cluster-repair-during-slow-reboot: two image flips and four added nodes
// left five 12-minute reboots, one at a time, after the last item, and the
// limit, the judge's time alone, cut off the last.
//
// The slots are the fewest any pool may have: its own maxUnavailable, and
// every setPool of the scenario's events and of the schedule. Turns taken
// only inside a maintenance window take whole periods of the window
// (windowedTime). Explorer seed 177039 of the 176713 regression: the
// scenario's setPool gave the pool maxUnavailable 1 and a daily 2h26m
// window, the schedule sent the pool back to v1 at 11h29m, and the limit,
// ten turns of the base 10% in wall time, ended the run in the next
// day's window with 82 of the hundred nodes rolled back.
func rolloutTime(sc *scenario.Scenario, s Schedule) time.Duration {
	nodes := 0
	for _, g := range sc.NodeGroups {
		nodes += g.Count
	}
	var drawn []*intstr.IntOrString
	for _, it := range s {
		for _, e := range it.Entries {
			if n, ok := e.Body["count"].(int); ok && e.Key == "addNodes" {
				nodes += n
			}
			if e.Key == "setPool" {
				switch v := e.Body["maxUnavailable"].(type) {
				case int:
					drawn = append(drawn, ptr.To(intstr.FromInt32(int32(v))))
				case string:
					drawn = append(drawn, ptr.To(intstr.FromString(v)))
				}
			}
		}
	}
	for _, e := range sc.Events {
		if e.SetPool != nil && e.SetPool.MaxUnavailable != nil {
			drawn = append(drawn, e.SetPool.MaxUnavailable)
		}
	}
	fewest := func(v *intstr.IntOrString) int {
		slots, err := rollout.MaxUnavailable(v, nodes)
		if err != nil || slots < 1 {
			return 1
		}
		return slots
	}
	least := max(nodes, 1)
	for _, v := range drawn {
		least = min(least, fewest(v))
	}
	var worst time.Duration
	for _, p := range sc.Bootroll.Pools {
		slots := min(least, fewest(p.MaxUnavailable))
		turns := (nodes + slots - 1) / slots
		worst = max(worst, time.Duration(turns)*(upperBound(sc.Host.Reboot)+RolloutSlack))
	}
	return windowedTime(worst, poolWindows(sc, s))
}

// windowedTime is the wall time that work takes when it may only be done
// inside one of ws (any of which may be the only one in force): for the
// window with the least open time, a wait for it to open and as many of
// its periods as its duration needs to hold the work.
func windowedTime(work time.Duration, ws []v1alpha1.MaintenanceWindow) time.Duration {
	if len(ws) == 0 || work <= 0 {
		return work
	}
	var worst time.Duration
	for _, w := range ws {
		open := w.Duration.Duration
		if open <= 0 {
			continue
		}
		periods := int64((work + open - 1) / open)
		worst = max(worst, time.Duration(periods+1)*windowGap(w))
	}
	return max(worst, work)
}

// windowGap is the longest time between two openings of w: a day, or the
// widest gap between the weekdays it opens on (rollout.OpensOn, as the
// controller reads them), a week when it opens on none.
func windowGap(w v1alpha1.MaintenanceWindow) time.Duration {
	const day = 24 * time.Hour
	var open []int // the weekdays it opens on, in order
	for wd := time.Sunday; wd <= time.Saturday; wd++ {
		if rollout.OpensOn(w, wd) {
			open = append(open, int(wd))
		}
	}
	if len(open) == 0 {
		return 7 * day
	}
	gap := open[0] + 7 - open[len(open)-1]
	for i := 1; i < len(open); i++ {
		gap = max(gap, open[i]-open[i-1])
	}
	return time.Duration(gap) * day
}

// judgeTime is how long a scenario's own timeouts and reboots may take to
// judge a node that failed after the last item and roll it on: its
// longest drainTimeout and healthTimeout (the controller's defaults where
// unset) and two of its longest reboots (the one that failed, and the one
// into the next image). A scenario with a 30m healthTimeout and 10m40s
// reboots needs 61m20s where RecoveryFloor gives 35m (explorer seed 95052
// of cluster-repair-during-slow-reboot: the node was judged at 30m and
// its next reboot cut off by the limit).
func judgeTime(sc *scenario.Scenario) time.Duration {
	var worst time.Duration
	for _, p := range sc.Bootroll.Pools {
		health, drain := 15*time.Minute, 10*time.Minute
		if p.HealthTimeout != nil {
			health = p.HealthTimeout.Duration
		}
		if p.DrainTimeout != nil {
			drain = p.DrainTimeout.Duration
		}
		worst = max(worst, health+drain)
	}
	return worst + 2*upperBound(sc.Host.Reboot)
}

// upperBound is the longest duration d draws, or an estimate of it for an
// unclamped normal or lognormal distribution.
func upperBound(d scenario.Distribution) time.Duration {
	switch {
	case d.Max > 0:
		return d.Max
	case d.Value > 0:
		return d.Value
	case d.Stddev > 0:
		return d.Mean + 3*d.Stddev
	}
	return max(d.Mean, 3*d.Median)
}

// prepare loads a target and measures its horizon: the schedule's times
// are drawn over the time the scenario takes without faults (it
// converged by then, or ran to its limit), run with its own seed.
func prepare(t Target, cfg Config) (prepared, error) {
	sc, err := scenario.Parse(t.File, t.Data)
	if err != nil {
		return prepared{}, err
	}
	doc, err := parseDocument(t.File, t.Data)
	if err != nil {
		return prepared{}, err
	}
	p := prepared{doc: doc, sc: sc, horizon: sc.Limit}
	// The scenario's own seed, so that a run's schedule depends on its seed
	// alone, not on where the exploration started.
	o := run(doc, variant{seed: sc.Seed}, cfg.Now)
	if o.err != nil {
		return prepared{}, fmt.Errorf("%s: the scenario does not run without faults: %w", t.File, o.err)
	}
	if o.res.Converged {
		p.horizon = max(o.res.ConvergedAt, time.Minute)
	}
	return p, nil
}

// runSeed draws the schedule of a seed (from the seed and the scenario's
// name alone) and runs it.
func runSeed(p prepared, seed uint64, cfg Config) runOut {
	sched := draw(newWorld(p.sc, p.doc, p.horizon), cfg.Categories, rand.New(rand.NewPCG(seed, nameHash(p.sc.Name))))
	return run(p.doc, variant{seed: seed, schedule: sched, limit: limitFor(p.sc, sched)}, cfg.Now)
}

// run renders and runs one variant.
func run(doc *document, v variant, now func() time.Time) runOut {
	start := now()
	out := runOut{v: v}
	data, err := doc.render(v)
	if err != nil {
		out.err = err
		return out
	}
	sc, err := scenario.Parse(doc.file, data)
	if err != nil {
		out.err = fmt.Errorf("the explored variant does not load: %w", err)
		return out
	}
	out.res, out.err = twin.Run(sc, twin.Options{Seed: v.seed})
	out.wall = now().Sub(start)
	return out
}

// violates reports whether a run violated inv ("error": failed to run).
func (o runOut) violates(inv string) bool {
	if inv == "error" {
		return o.err != nil
	}
	return o.err == nil && o.res.Caught(inv)
}

func (o runOut) message(inv string) string {
	if o.err != nil {
		return o.err.Error()
	}
	for _, v := range o.res.Violations {
		if v.Invariant == inv {
			return v.String()
		}
	}
	return ""
}

// failure writes and shrinks the failing run o.
func failure(p prepared, o runOut, inv string, cfg Config) Failure {
	f := Failure{Scenario: p.sc.Name, File: p.doc.file, Seed: o.v.seed, Invariant: inv, Message: o.message(inv), Schedule: o.v.schedule}
	if o.err != nil {
		f.Err = o.err.Error()
	}
	shrunk, runs := o.v, 0
	if cfg.ShrinkRuns > 0 && inv != "error" {
		shrunk, runs = shrink(p, o.v, inv, cfg)
	}
	f.Shrunk, f.ShrinkRuns = shrunk.schedule, runs
	shrunkMsg := f.Message
	if runs > 0 {
		if so := run(p.doc, shrunk, cfg.Now); so.violates(inv) {
			shrunkMsg = so.message(inv)
		}
	}
	if cfg.Out == "" {
		return f
	}
	base := fmt.Sprintf("%s.%s.seed%d", p.sc.Name, inv, o.v.seed)
	f.FullFile = filepath.Join(cfg.Out, base+".full.yaml")
	f.ShrunkFile = filepath.Join(cfg.Out, base+".yaml")
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		f.Err = err.Error()
		return f
	}
	cats := make([]string, len(cfg.Categories))
	for i, c := range cfg.Categories {
		cats[i] = string(c)
	}
	// The run alone: its schedule depends on the file, the seed and the
	// categories only.
	found := fmt.Sprintf("Found by: bootroll scenario explore %s --seeds 1 --first-seed %d --faults %s", p.doc.file, o.v.seed, strings.Join(cats, ","))
	full := o.v
	full.name = dnsLabel(p.sc.Name + "-" + inv)
	full.header = []string{found, "Violates " + inv + ": " + oneLine(f.Message),
		fmt.Sprintf("The original scenario with the %d drawn fault(s)/action(s) at explicit times; shrunk: %s.", len(o.v.schedule), filepath.Base(f.ShrunkFile)),
		"Replay: bootroll scenario run " + f.FullFile}
	shrunk.name = full.name
	shrunk.header = []string{found, "Violates " + inv + ": " + oneLine(shrunkMsg),
		fmt.Sprintf("Shrunk automatically from %d to %d fault(s)/action(s) in %d runs (nodes and replicas cut where it still fails).", len(o.v.schedule), len(shrunk.schedule), runs),
		"Replay: bootroll scenario run " + f.ShrunkFile}
	for _, w := range []struct {
		path string
		v    variant
	}{{f.FullFile, full}, {f.ShrunkFile, shrunk}} {
		data, err := p.doc.render(w.v)
		if err == nil {
			err = os.WriteFile(w.path, data, 0o644)
		}
		if err != nil {
			f.Err = err.Error()
		}
	}
	return f
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// shrink makes v smaller while it still violates inv: it drops schedule
// items, cuts node groups and workload replicas, and rounds times. It
// returns the smallest variant found and how many runs it took.
func shrink(p prepared, v variant, inv string, cfg Config) (variant, int) {
	runs := 0
	fails := func(c variant) bool {
		if runs >= cfg.ShrinkRuns {
			return false
		}
		runs++
		c.limit = limitFor(p.sc, c.schedule)
		return run(p.doc, c, cfg.Now).violates(inv)
	}
	cur := v
	cur.counts, cur.replicas = map[int]int{}, map[int]int{}
	// 1. Drop items, the latest first, until none can go.
	for changed := true; changed; {
		changed = false
		for i := len(cur.schedule) - 1; i >= 0; i-- {
			c := cur
			c.schedule = slices.Delete(slices.Clone(cur.schedule), i, i+1)
			if fails(c) {
				cur, changed = c, true
			}
		}
	}
	// 2. Cut node groups and replicas: the least first, then halves.
	for i, g := range p.sc.NodeGroups {
		n := g.Count
		for n > 1 {
			tried := false
			for _, try := range []int{1, n / 2} {
				if try >= n {
					continue
				}
				c := cur
				c.counts = maps.Clone(cur.counts)
				c.counts[i] = try
				if fails(c) {
					cur, n, tried = c, try, true
					break
				}
			}
			if !tried {
				break
			}
		}
	}
	for i, w := range p.sc.Workloads {
		n := w.Replicas
		for n > 0 {
			tried := false
			for _, try := range []int{0, n / 2} {
				if try >= n {
					continue
				}
				c := cur
				c.replicas = maps.Clone(cur.replicas)
				c.replicas[i] = try
				if fails(c) {
					cur, n, tried = c, try, true
					break
				}
			}
			if !tried {
				break
			}
		}
	}
	// 3. Round each item's times to whole seconds, then 10 s, then minutes,
	// keeping the gaps inside the item.
	for i := range cur.schedule {
		for _, unit := range []time.Duration{time.Minute, 10 * time.Second, time.Second} {
			it := cur.schedule[i]
			shift := it.Entries[0].At.Round(unit) - it.Entries[0].At
			if shift == 0 {
				break
			}
			c := cur
			c.schedule = slices.Clone(cur.schedule)
			moved := Item{Category: it.Category, Entries: slices.Clone(it.Entries)}
			for j := range moved.Entries {
				moved.Entries[j].At = max(0, moved.Entries[j].At+shift)
			}
			c.schedule[i] = moved
			if fails(c) {
				cur = c
				break
			}
		}
	}
	cur.limit = limitFor(p.sc, cur.schedule)
	return cur, runs
}

// Hunt runs seeds FirstSeed, FirstSeed+1, ... of one target in order until
// a run violates inv or maxRuns runs were made, and shrinks the failing
// run. It returns the failure (nil when none was found) and how many runs
// it took to find it. It is deterministic: planted-bug tests use it to
// show how many runs a bug class needs.
func Hunt(t Target, inv string, maxRuns int, cfg Config) (*Failure, int, error) {
	if cfg.FirstSeed == 0 {
		cfg.FirstSeed = 1
	}
	if cfg.ShrinkRuns == 0 {
		cfg.ShrinkRuns = 150
	}
	if cfg.Now == nil {
		cfg.Now = time.Now // edge: wall clock for the wall times reported
	}
	p, err := prepare(t, cfg)
	if err != nil {
		return nil, 0, err
	}
	for k := range maxRuns {
		seed := cfg.FirstSeed + uint64(k)
		o := runSeed(p, seed, cfg)
		if o.violates(inv) {
			f := failure(p, o, inv, cfg)
			return &f, k + 1, nil
		}
	}
	return nil, maxRuns, nil
}
