package hostmode

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/bootroll/bootroll/sim/scenario"
)

// hostFault is a fault host mode plays on the hosts: at a time after the
// start, on its target, it arms a host's next boot or reboot.
type hostFault struct {
	at     time.Duration
	target scenario.Target
	// arm applies the fault to a played node (its host or its daemon).
	arm  func(p *player)
	name string
}

// faultPlan is the faults of a scenario as host mode sees them: those it
// plays, in time order, and the names of those it does not.
type faultPlan struct {
	timed   []hostFault
	skipped []string
	rng     *rand.Rand
	// writeCrashes are the daemonWriteCrash faults, in effect over spans
	// (crashGate counts the steps).
	writeCrashes []writeCrash
}

// FaultName names a scenario fault for reports: faults[i].<kind>.
func FaultName(i int, f *scenario.Fault) string {
	kind := "unknown"
	switch {
	case f.BootFailure != nil:
		kind = "bootFailure"
	case f.LongReboot != nil:
		kind = "longReboot"
	case f.ClockSkew != nil:
		kind = "clockSkew"
	case f.ControllerRestart != nil:
		kind = "controllerRestart"
	case f.DaemonCrash != nil:
		kind = "daemonCrash"
	case f.NodeCrash != nil:
		kind = "nodeCrash"
	case f.APIErrors != nil:
		kind = "apiErrors"
	case f.WatchFaults != nil:
		kind = "watchFaults"
	case f.ControllerCrash != nil:
		kind = "controllerCrash"
	case f.DaemonWriteCrash != nil:
		kind = "daemonWriteCrash"
	case f.PowerCycle != nil:
		kind = "powerCycle"
	case f.RegistryOutage != nil:
		kind = "registryOutage"
	case f.SlowPulls != nil:
		kind = "slowPulls"
	case f.DiskFill != nil:
		kind = "diskFill"
	case f.NodeConditionAfterBoot != nil:
		kind = "nodeConditionAfterBoot"
	case f.DaemonSetNotReadyAfterBoot != nil:
		kind = "daemonSetNotReadyAfterBoot"
	case f.ReadyFlapsAfterBoot != nil:
		kind = "readyFlapsAfterBoot"
	}
	return fmt.Sprintf("faults[%d].%s", i, kind)
}

// planFaults picks the faults host mode plays: bootFailure, longReboot
// and daemonCrash (one node's daemon process, not the host-mode process:
// the other nodes and the hosts' reboots in flight go on), timed from the
// start of the run (a window's time drawn from the seeded source), and
// daemonWriteCrash (in effect over its span; writeCrashes). The others
// are named in skipped.
func planFaults(sc *scenario.Scenario, seed uint64) faultPlan {
	fp := faultPlan{rng: NodeRand(seed, "faults")}
	for i := range sc.Faults {
		f := &sc.Faults[i]
		hf := hostFault{name: FaultName(i, f)}
		switch {
		case f.BootFailure != nil:
			mode := f.BootFailure.Mode
			hf.target, hf.arm = f.BootFailure.Target, func(p *player) { p.host.FailNextBoot(mode) }
		case f.LongReboot != nil:
			d := f.LongReboot.Duration
			hf.target, hf.arm = f.LongReboot.Target, func(p *player) { p.host.LongNextReboot(d) }
		case f.DaemonCrash != nil:
			d := f.DaemonCrash.DownFor
			hf.target, hf.arm = f.DaemonCrash.Target, func(p *player) { p.crashDaemon(d) }
		case f.DaemonWriteCrash != nil:
			// In effect from its time (or its window's start) on, as in
			// the twin: every node's daemon counts its own steps.
			w := writeCrash{name: hf.name, f: *f.DaemonWriteCrash}
			switch {
			case f.At != nil:
				w.from = *f.At
			case f.Window != nil:
				w.from, w.to = f.Window.From, f.Window.To
			}
			fp.writeCrashes = append(fp.writeCrashes, w)
			continue
		default:
			fp.skipped = append(fp.skipped, hf.name)
			continue
		}
		switch {
		case f.At != nil:
			hf.at = *f.At
		case f.Window != nil:
			w := f.Window
			hf.at = w.From
			if w.To > w.From {
				hf.at += time.Duration(fp.rng.Int64N(int64(w.To - w.From)))
			}
		}
		fp.timed = append(fp.timed, hf)
	}
	slices.SortStableFunc(fp.timed, func(a, b hostFault) int { return int(a.at - b.at) })
	return fp
}

// crashes returns the daemonWriteCrash faults counted from start; nil
// when there are none.
func (fp faultPlan) crashes(start time.Time, seed uint64) *writeCrashes {
	if len(fp.writeCrashes) == 0 {
		return nil
	}
	return &writeCrashes{start: start, seed: seed, faults: fp.writeCrashes,
		counts: map[string]*scenario.CrashCount{}, rngs: map[string]*rand.Rand{}}
}

// run arms each fault at its time, until ctx ends.
func (fp faultPlan) run(ctx context.Context, clk clock.Clock, ps *players) {
	start := clk.Now()
	for _, f := range fp.timed {
		if wait := start.Add(f.at).Sub(clk.Now()); wait > 0 {
			select {
			case <-clk.After(wait):
			case <-ctx.Done():
				return
			}
		}
		for _, name := range Targets(f.target, ps.names(), fp.rng) {
			if p := ps.get(name); p != nil {
				p.log.Info("fault armed", "fault", f.name)
				f.arm(p)
			}
		}
	}
}

// Targets resolves a fault's target among the played nodes, as the twin
// does: the named node, or count nodes of the group (<group>-<i>) drawn
// from r.
func Targets(t scenario.Target, played []string, r *rand.Rand) []string {
	if t.Node != "" {
		if slices.Contains(played, t.Node) {
			return []string{t.Node}
		}
		return nil
	}
	type cand struct {
		name string
		i    int
	}
	var cands []cand
	for _, n := range played {
		rest, ok := strings.CutPrefix(n, t.Group+"-")
		if !ok {
			continue
		}
		if i, err := strconv.Atoi(rest); err == nil && strconv.Itoa(i) == rest {
			cands = append(cands, cand{n, i})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int { return a.i - b.i })
	count := min(max(t.Count, 1), len(cands))
	out := make([]string, 0, count)
	for k := range count {
		j := k + r.IntN(len(cands)-k)
		cands[k], cands[j] = cands[j], cands[k]
		out = append(out, cands[k].name)
	}
	slices.Sort(out)
	return out
}
