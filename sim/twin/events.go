package twin

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/cluster"
	"github.com/bootroll/bootroll/sim/scenario"
)

// schedule puts the scenario's timed events and faults on the engine.
// Fault times drawn from a window are drawn now, in file order, so they
// depend on the seed only.
func (r *runner) schedule() {
	start := r.sc.Start
	r.quietAfter = start
	later := func(t time.Time) {
		if t.After(r.quietAfter) {
			r.quietAfter = t
		}
	}
	for i, ev := range r.sc.Events {
		at := start.Add(ev.At)
		later(at)
		r.eng.At(at, fmt.Sprintf("scenario/event/%d", i), func() {
			if err := r.event(ev); err != nil {
				r.fail(fmt.Errorf("events[%d] at %s: %w", i, ev.At, err))
			}
		})
	}
	for i, f := range r.sc.Faults {
		if r.scheduleAPIFault(i, f) { // cache.go: faults in effect over a span
			continue
		}
		var off time.Duration
		switch {
		case f.At != nil:
			off = *f.At
		case f.Window != nil:
			off = f.Window.From + time.Duration(r.eng.Rand().Int64N(int64(f.Window.To-f.Window.From)))
		}
		at := start.Add(off)
		later(at.Add(faultLasts(f)))
		r.eng.At(at, fmt.Sprintf("scenario/fault/%d", i), func() {
			if err := r.fault(f); err != nil {
				r.fail(fmt.Errorf("faults[%d] at %s: %w", i, off, err))
			}
		})
	}
}

// event makes one timed change.
func (r *runner) event(ev scenario.Event) error {
	switch {
	case ev.SetPoolImage != nil:
		e := ev.SetPoolImage
		im := r.sc.Image(e.Image)
		if im == nil {
			return fmt.Errorf("setPoolImage: unknown image %q", e.Image)
		}
		r.tr.emit("scenario.setPoolImage", "BootcNodePool/"+e.Pool, map[string]any{"image": e.Image, "ref": im.Ref})
		return r.updatePool(e.Pool, func(p *v1alpha1.BootcNodePool) { p.Spec.Image = v1alpha1.ImageReference(im.Ref) })
	case ev.Pause != nil:
		e := ev.Pause
		r.tr.emit("scenario.pause", "BootcNodePool/"+e.Pool, map[string]any{"paused": e.Paused})
		return r.updatePool(e.Pool, func(p *v1alpha1.BootcNodePool) { p.Spec.Paused = e.Paused })
	case ev.ScaleWorkload != nil:
		e := ev.ScaleWorkload
		r.tr.emit("scenario.scaleWorkload", "Workload/"+e.Workload, map[string]any{"replicas": e.Replicas})
		return r.cl.ScaleWorkload(r.ctx, e.Workload, e.Replicas)
	case ev.AddNodes != nil:
		return r.addNodes(ev.AddNodes)
	case ev.RemoveNodes != nil:
		e := ev.RemoveNodes
		names, err := r.cl.RemoveNodes(r.ctx, e.Group, e.Count)
		r.tr.emit("scenario.removeNodes", "NodeGroup/"+e.Group, map[string]any{"count": e.Count, "nodes": names})
		return err
	case ev.SetPinnedImages != nil:
		return r.setPinnedImages(ev.SetPinnedImages)
	case ev.SetNodeClassImage != nil:
		return r.setNodeClassImage(ev.SetNodeClassImage)
	case ev.SetNodePoolLabels != nil:
		return r.setNodePoolLabels(ev.SetNodePoolLabels)
	}
	return r.action(ev)
}

// updatePool changes a pool's spec as a user would, with the admin client.
func (r *runner) updatePool(name string, mutate func(*v1alpha1.BootcNodePool)) error {
	c := r.api.AdminClient()
	var p v1alpha1.BootcNodePool
	if err := c.Get(r.ctx, client.ObjectKey{Name: name}, &p); err != nil {
		if apierrors.IsNotFound(err) {
			// A deletePool event (or an explored schedule) took it away.
			r.skipped("scenario.updatePool", "BootcNodePool/"+name, "no such pool now")
			return nil
		}
		return fmt.Errorf("get pool %s: %w", name, err)
	}
	mutate(&p)
	if err := c.Update(r.ctx, &p); err != nil {
		return fmt.Errorf("update pool %s: %w", name, err)
	}
	return nil
}

// fault injects one fault.
func (r *runner) fault(f scenario.Fault) error {
	switch {
	case f.ControllerRestart != nil:
		r.restartController(f.ControllerRestart.DownFor)
		return nil
	case f.DaemonCrash != nil:
		nodes := r.targets(f.DaemonCrash.Target)
		r.tr.emit("fault.daemonCrash", "", map[string]any{"nodes": nodes, "downFor": f.DaemonCrash.DownFor.String()})
		for _, n := range nodes {
			if r.nodeGone("fault.daemonCrash", n) {
				continue
			}
			if err := r.cl.CrashDaemonFor(n, f.DaemonCrash.DownFor); err != nil {
				if errors.Is(err, cluster.ErrNotRunning) {
					// The node is rebooting or down: there is no daemon to kill.
					r.tr.emit("fault.skipped", "Node/"+n, map[string]any{"reason": err.Error()})
					continue
				}
				return fmt.Errorf("daemonCrash %s: %w", n, err)
			}
		}
		return nil
	case f.NodeCrash != nil:
		nodes := r.targets(f.NodeCrash.Target)
		r.tr.emit("fault.nodeCrash", "", map[string]any{"nodes": nodes, "downFor": f.NodeCrash.DownFor.String()})
		for _, n := range nodes {
			if r.nodeGone("fault.nodeCrash", n) {
				continue
			}
			if err := r.cl.CrashNode(r.ctx, n, f.NodeCrash.DownFor); err != nil {
				return fmt.Errorf("nodeCrash %s: %w", n, err)
			}
		}
		return nil
	}
	return r.hostFault(f)
}

// targets resolves a fault's target to node names: the named node, or
// count nodes of the group drawn from the run's PRNG among the group's
// nodes that exist now.
func (r *runner) targets(t scenario.Target) []string {
	if t.Node != "" {
		return []string{t.Node}
	}
	type cand struct {
		name string
		i    int
	}
	var cands []cand
	for _, n := range r.cl.Nodes() {
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
	rng := r.eng.Rand()
	out := make([]string, 0, count)
	for k := range count {
		j := k + rng.IntN(len(cands)-k)
		cands[k], cands[j] = cands[j], cands[k]
		out = append(out, cands[k].name)
	}
	slices.Sort(out)
	return out
}
