// Package invariant checks the twin's named invariants and a scenario's
// expectations. A Checker keeps a World up to date from the API server's
// watch events, checks the invariants that can fail at any moment after
// every engine event (max-unavailable, pdb-respected, no-double-reboot) in
// time that does not grow with the cluster, and checks the rest at the end
// of a run (no-leaked-cordon, no-leaked-annotation, converges and the
// expectations).
package invariant

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/cluster"
	"github.com/bootroll/bootroll/sim/scenario"
)

// Names of the checks that are expectations rather than invariants; they
// appear in violations like invariant names.
const (
	ExpectCompletesWithin = "completes-within"
	ExpectFinalImages     = "final-images"
	ExpectFailedNodes     = "failed-nodes"
	ExpectHalted          = "halted"
)

// Info describes one named invariant.
type Info struct {
	Name        scenario.Invariant
	Description string
	// Karpenter is true for invariants about Karpenter, which the twin
	// cannot check yet.
	Karpenter bool
}

// Registry lists every invariant the twin knows, in scenario.AllInvariants
// order.
var Registry = []Info{
	{scenario.InvMaxUnavailable, "never more nodes of a pool unavailable because of bootroll (slot marker or slot phase) than maxUnavailable of its current node count", false},
	{scenario.InvPDBRespected, "no PodDisruptionBudget becomes violated in an event in which bootroll evicted (or deleted) pods", false},
	// Karpenter comes in a later issue: without a karpenter section there
	// is nothing that could reap or churn a node, so the check passes; a
	// scenario with one is refused until the fake Karpenter exists.
	{scenario.InvNoReapWhileUpdating, "Karpenter disrupts, taints, drains or repairs no node that holds a slot; an expiry is recorded as a forceful exception", true},
	{scenario.InvNoLeakedCordon, "at the end no node outside a slot is cordoned by bootroll, and nodes cordoned before stay cordoned", false},
	{scenario.InvNoLeakedAnnotation, "at the end no node outside a slot carries an annotation bootroll adds that it did not have at creation", false},
	{scenario.InvNoDoubleReboot, "no node is rebooted twice for the same image", false},
	{scenario.InvNoChurn, "Karpenter replaces or deletes no node (expiry aside) during the run", true},
	{scenario.InvConverges, "every pool ends UpToDate, or Halted with a reason, before the limit", false},
	{scenario.InvOSStagingNotStarved, "no OS staging fails for lack of image-filesystem space while pinned images hold enough of it that the staging would have fit", false},
	{scenario.InvPinnedSetsExact, "at the end every BootcNode carries its pinned sets as the PinnedImageSets say and reports exactly their current images, and the images it reports present are on the host", false},
}

// Violation is one failed invariant or expectation.
type Violation struct {
	// Invariant is the invariant's or expectation's name.
	Invariant string
	// At is the virtual time since the start of the run.
	At time.Duration
	// Objects name what is involved, "Kind/name", sorted within a kind.
	Objects []string
	// Message says what was seen.
	Message string
}

// String formats the violation for a person.
func (v Violation) String() string {
	return fmt.Sprintf("%s at %s: %s [%s]", v.Invariant, v.At, v.Message, strings.Join(v.Objects, ", "))
}

// Sources are the cluster model's answers the checks need.
type Sources struct {
	// RebootsFor returns how many times node rebooted into image.
	RebootsFor func(node, image string) int
	// Booted returns the image node boots now.
	Booted func(node string) string
	// PDBs returns the PodDisruptionBudgets' state.
	PDBs func() []cluster.PDBState
	// PodRemovals returns how many requests bootroll has made that remove
	// pods: evictions, plus direct deletions (only the deliberately broken
	// bootroll.testOnly.deleteInsteadOfEvict deletes pods, and a PDB
	// violated by such a deletion must count as bootroll's).
	PodRemovals func() uint64
}

// Outcome is how a run ended, for the end-of-run checks.
type Outcome struct {
	// End is the virtual time since the start when the run stopped.
	End time.Duration
	// Converged is true when every pool was converged at the end;
	// ConvergedAt is since when.
	Converged   bool
	ConvergedAt time.Duration
}

// Checker checks one run.
type Checker struct {
	sc      *scenario.Scenario
	src     Sources
	start   time.Time
	enabled map[scenario.Invariant]bool
	world   *World

	violations []Violation
	// caught counts violations per name, including the repeats that are
	// not recorded.
	caught map[string]int

	pdbViolated  map[string]bool
	lastRemovals uint64
	doubleReboot map[string]bool // node + "\x00" + image already reported
	// pendingReboot are nodes whose boot changed in the current event.
	pendingReboot []string
	// karp follows the fake Karpenter (karpenter.go).
	karp *karpenterState
	// pinned follows PinnedImageSets and pinned-image progress (pinned.go).
	pinned *pinnedState
}

// maxRecorded bounds the violations recorded per name; later ones are
// only counted.
const maxRecorded = 20

// New returns the checker of a scenario's run that starts at start. It
// refuses invariants it cannot check: those about Karpenter when the
// scenario has a karpenter section.
func New(sc *scenario.Scenario, src Sources, start time.Time) (*Checker, error) {
	c := &Checker{
		sc: sc, src: src, start: start,
		enabled:      map[scenario.Invariant]bool{},
		world:        NewWorld(),
		caught:       map[string]int{},
		pdbViolated:  map[string]bool{},
		doubleReboot: map[string]bool{},
	}
	for _, inv := range sc.Expect.Invariants {
		info := lookup(inv)
		if info == nil {
			return nil, fmt.Errorf("expect.invariants: unknown invariant %q", inv)
		}
		c.enabled[inv] = true
	}
	return c, nil
}

func lookup(inv scenario.Invariant) *Info {
	for i := range Registry {
		if Registry[i].Name == inv {
			return &Registry[i]
		}
	}
	return nil
}

// World returns the checker's view of the cluster, which the runner reads
// for convergence and timelines.
func (c *Checker) World() *World { return c.world }

// Enabled reports whether the scenario checks inv.
func (c *Checker) Enabled(inv scenario.Invariant) bool { return c.enabled[inv] }

// Observe applies a watch event. Subscribe it to the API server before
// anything that writes.
func (c *Checker) Observe(ev apiserver.Event) {
	c.world.Observe(ev)
	c.observePinned(ev)
	if bn, ok := ev.Object.(*v1alpha1.BootcNode); ok && ev.Type == apiserver.Modified && c.enabled[scenario.InvNoDoubleReboot] {
		old := ev.Old.(*v1alpha1.BootcNode)
		if old.Status.Daemon.BootID != bn.Status.Daemon.BootID || hostDigest(old.Status.Booted) != hostDigest(bn.Status.Booted) {
			c.pendingReboot = append(c.pendingReboot, bn.Name)
		}
	}
}

func hostDigest(h *v1alpha1.HostImage) string {
	if h == nil {
		return ""
	}
	return h.Digest
}

// Check runs the invariants that hold at every moment; call it after every
// engine event with the virtual time. Its cost is that of the pools and
// nodes that changed in the event.
func (c *Checker) Check(now time.Time) {
	at := now.Sub(c.start)
	if c.enabled[scenario.InvMaxUnavailable] {
		for _, p := range c.world.TakeDirty() {
			c.checkMaxUnavailable(p, at)
		}
	} else {
		c.world.TakeDirty()
	}
	if c.world.TakePodsChanged() && c.src.PDBs != nil {
		c.checkPDBs(at)
	}
	c.checkPinned(at)
	if len(c.pendingReboot) > 0 {
		for _, name := range c.pendingReboot {
			c.checkReboots(name, at)
		}
		c.pendingReboot = c.pendingReboot[:0]
	}
}

func (c *Checker) checkMaxUnavailable(p *Pool, at time.Duration) {
	if !p.live {
		return
	}
	limit, err := controller.MaxUnavailable(p.MaxUnavailable, p.Members)
	if err != nil {
		c.record(Violation{Invariant: string(scenario.InvMaxUnavailable), At: at, Objects: []string{"BootcNodePool/" + p.Name},
			Message: fmt.Sprintf("spec.rollout.maxUnavailable: %v", err)})
		return
	}
	over := p.Unavailable > limit
	if over && !p.overLimit {
		objs := []string{"BootcNodePool/" + p.Name}
		for _, n := range p.UnavailableNodes() {
			objs = append(objs, "Node/"+n)
		}
		c.record(Violation{Invariant: string(scenario.InvMaxUnavailable), At: at, Objects: objs,
			Message: fmt.Sprintf("%d nodes of pool %s are unavailable because of bootroll; maxUnavailable %s of %d nodes allows %d",
				p.Unavailable, p.Name, intOrString(p), p.Members, limit)})
	}
	p.overLimit = over
}

func intOrString(p *Pool) string {
	if p.MaxUnavailable == nil {
		return "(default 1)"
	}
	return p.MaxUnavailable.String()
}

// checkPDBs refreshes the PDBs' state after pods changed. A PDB that turns
// violated in an event in which bootroll asked for evictions (or deleted
// pods) is a violation; one violated by a node crash or a scale-down is
// not.
func (c *Checker) checkPDBs(at time.Duration) {
	var ev uint64
	if c.src.PodRemovals != nil {
		ev = c.src.PodRemovals()
	}
	evicted := ev != c.lastRemovals
	c.lastRemovals = ev
	for _, st := range c.src.PDBs() {
		key := st.Namespace + "/" + st.Name
		was := c.pdbViolated[key]
		if st.Violated && !was && evicted && c.enabled[scenario.InvPDBRespected] {
			c.record(Violation{Invariant: string(scenario.InvPDBRespected), At: at, Objects: []string{"PodDisruptionBudget/" + key},
				Message: fmt.Sprintf("PodDisruptionBudget %s became violated by a bootroll eviction or pod deletion: %s", key, pdbCounts(st))})
		}
		c.pdbViolated[key] = st.Violated
	}
}

func pdbCounts(st cluster.PDBState) string {
	return fmt.Sprintf("%d healthy of %d expected, %d must be healthy", st.Healthy, st.ExpectedPods, st.DesiredHealthy)
}

func (c *Checker) checkReboots(name string, at time.Duration) {
	n := c.world.Node(name)
	if n == nil || c.src.RebootsFor == nil {
		return
	}
	for _, img := range []string{n.DesiredImage, n.LastRebootImage} {
		c.checkReboot(name, img, at)
	}
}

func (c *Checker) checkReboot(node, image string, at time.Duration) {
	if image == "" {
		return
	}
	key := node + "\x00" + image
	if c.doubleReboot[key] {
		return
	}
	if k := c.src.RebootsFor(node, image); k > 1 {
		c.doubleReboot[key] = true
		c.record(Violation{Invariant: string(scenario.InvNoDoubleReboot), At: at, Objects: []string{"Node/" + node},
			Message: fmt.Sprintf("node %s rebooted %d times into %s", node, k, image)})
	}
}

// PoolViewConsistent names the violation of the controller's own
// self-check that the twin reports through Report: a pool's incrementally
// kept node table differed from a full rebuild. It is checked in every
// run, whatever the scenario's invariants list.
const PoolViewConsistent = "pool-view-consistent"

// Report records a violation the caller found itself, e.g. a self-check
// of the controller that failed.
func (c *Checker) Report(v Violation) { c.record(v) }

// record keeps a violation; past maxRecorded of one name it only counts.
func (c *Checker) record(v Violation) {
	c.caught[v.Invariant]++
	if c.caught[v.Invariant] <= maxRecorded {
		c.violations = append(c.violations, v)
	}
}

// Finish runs the end-of-run checks and expectations.
func (c *Checker) Finish(out Outcome) {
	at := out.End
	w := c.world
	names := w.NodeNames()
	if c.enabled[scenario.InvNoDoubleReboot] && c.src.RebootsFor != nil {
		for _, name := range names {
			n := w.nodes[name]
			for _, img := range []string{n.DesiredImage, n.FailedImage, n.LastRebootImage} {
				c.checkReboot(name, img, at)
			}
		}
	}
	if c.enabled[scenario.InvNoLeakedCordon] {
		c.leakedCordons(names, at)
	}
	if c.enabled[scenario.InvNoLeakedAnnotation] {
		c.leakedAnnotations(names, at)
	}
	if c.enabled[scenario.InvConverges] && !out.Converged {
		var objs, parts []string
		for _, p := range w.Pools() {
			if !p.converged {
				objs = append(objs, "BootcNodePool/"+p.Name)
				parts = append(parts, poolState(p))
			}
		}
		c.record(Violation{Invariant: string(scenario.InvConverges), At: at, Objects: objs,
			Message: fmt.Sprintf("not every pool is UpToDate or Halted with a reason at the end (%s): %s", at, strings.Join(parts, "; "))})
	}
	c.finishKarpenter(at)
	c.expectations(out)
	c.finishPinned(at)
}

func poolState(p *Pool) string {
	s := fmt.Sprintf("%s: %q", p.Name, p.Summary)
	if p.ObservedGeneration != p.Generation {
		s += fmt.Sprintf(" (status of generation %d, spec at %d)", p.ObservedGeneration, p.Generation)
	}
	if p.UpToDateReason != "" {
		s += " UpToDate=" + fmt.Sprint(p.UpToDate) + "/" + p.UpToDateReason
	}
	return s
}

// leakedCordons finds nodes outside a slot that bootroll left cordoned or
// marked, and nodes whose admin cordon bootroll removed. A node in a slot
// when the run stops (say mid-drain at the limit) is not a leak.
func (c *Checker) leakedCordons(names []string, at time.Duration) {
	var leaked, uncordoned []string
	for _, name := range names {
		n := c.world.nodes[name]
		if !n.Exists || holdsSlot(n.Phase) {
			continue
		}
		switch {
		case n.Marked || (n.Unschedulable && !n.InitialUnschedulable):
			leaked = append(leaked, name)
		case !n.Unschedulable && n.InitialUnschedulable:
			uncordoned = append(uncordoned, name)
		}
	}
	if len(leaked) > 0 {
		c.record(Violation{Invariant: string(scenario.InvNoLeakedCordon), At: at, Objects: nodeObjects(leaked),
			Message: fmt.Sprintf("%d node(s) outside a slot are left cordoned by bootroll at the end: %s", len(leaked), short(leaked))})
	}
	if len(uncordoned) > 0 {
		c.record(Violation{Invariant: string(scenario.InvNoLeakedCordon), At: at, Objects: nodeObjects(uncordoned),
			Message: fmt.Sprintf("%d node(s) cordoned before the rollout are uncordoned at the end: %s", len(uncordoned), short(uncordoned))})
	}
}

func (c *Checker) leakedAnnotations(names []string, at time.Duration) {
	var leaked, parts []string
	for _, name := range names {
		n := c.world.nodes[name]
		if !n.Exists || holdsSlot(n.Phase) {
			continue
		}
		var extra []string
		for _, a := range n.Owned {
			if !slices.Contains(n.InitialOwned, a) && !c.postUpdateProtected(n, a) {
				extra = append(extra, a)
			}
		}
		if len(extra) > 0 {
			leaked = append(leaked, name)
			parts = append(parts, name+" ("+strings.Join(extra, ", ")+")")
		}
	}
	if len(leaked) > 0 {
		c.record(Violation{Invariant: string(scenario.InvNoLeakedAnnotation), At: at, Objects: nodeObjects(leaked),
			Message: fmt.Sprintf("%d node(s) outside a slot keep annotations bootroll added: %s", len(leaked), short(parts))})
	}
}

func (c *Checker) expectations(out Outcome) {
	e := c.sc.Expect
	at := out.End
	if e.CompletesWithin != nil {
		switch {
		case !out.Converged:
			c.record(Violation{Invariant: ExpectCompletesWithin, At: at, Objects: c.unconverged(),
				Message: fmt.Sprintf("the rollout did not complete (every pool UpToDate or Halted) by the end of the run at %s; expected within %s", at, *e.CompletesWithin)})
		case out.ConvergedAt > *e.CompletesWithin:
			c.record(Violation{Invariant: ExpectCompletesWithin, At: out.ConvergedAt, Objects: c.poolObjects(),
				Message: fmt.Sprintf("the rollout completed at %s; expected within %s", out.ConvergedAt, *e.CompletesWithin)})
		}
	}
	for _, pool := range sortedKeys(e.FinalImages) {
		im := c.sc.Image(e.FinalImages[pool])
		if im == nil || c.src.Booted == nil {
			continue
		}
		var wrong, parts []string
		for _, name := range c.world.Members(pool) {
			if b := c.src.Booted(name); !imageMatches(b, im) {
				wrong = append(wrong, name)
				parts = append(parts, fmt.Sprintf("%s boots %s", name, b))
			}
		}
		if len(wrong) > 0 {
			c.record(Violation{Invariant: ExpectFinalImages, At: at, Objects: append([]string{"BootcNodePool/" + pool}, nodeObjects(wrong)...),
				Message: fmt.Sprintf("%d node(s) of pool %s do not boot %s (%s) at the end: %s", len(wrong), pool, im.Name, im.Ref, short(parts))})
		}
	}
	for _, pool := range sortedKeys(e.FailedNodes) {
		r := e.FailedNodes[pool]
		var failed []string
		for _, name := range c.world.NodeNames() {
			n := c.world.nodes[name]
			if n.HasBootcNode && n.BootcPool == pool && n.Phase == v1alpha1.PhaseFailed {
				failed = append(failed, name)
			}
		}
		if len(failed) < r.Min || (r.Max != nil && len(failed) > *r.Max) {
			want := fmt.Sprintf("at least %d", r.Min)
			if r.Max != nil {
				want = fmt.Sprintf("%d to %d", r.Min, *r.Max)
				if *r.Max == r.Min {
					want = fmt.Sprint(r.Min)
				}
			}
			c.record(Violation{Invariant: ExpectFailedNodes, At: at, Objects: append([]string{"BootcNodePool/" + pool}, nodeObjects(failed)...),
				Message: fmt.Sprintf("pool %s has %d Failed node(s) at the end; expected %s", pool, len(failed), want)})
		}
	}
	for _, pool := range sortedKeys(e.Halted) {
		p := c.world.Pool(pool)
		got := p != nil && p.Halted
		if got != e.Halted[pool] {
			msg := fmt.Sprintf("pool %s is not halted at the end; expected halted", pool)
			if got {
				msg = fmt.Sprintf("pool %s is halted at the end (%s); expected not halted", pool, p.HaltedReason)
			}
			c.record(Violation{Invariant: ExpectHalted, At: at, Objects: []string{"BootcNodePool/" + pool}, Message: msg})
		}
	}
}

// imageMatches reports whether what the cluster model says a node boots is
// the scenario image im: its short name, ref, digest or a ref pinned to its
// digest.
func imageMatches(booted string, im *scenario.Image) bool {
	switch {
	case booted == "":
		return false
	case booted == im.Name, booted == im.Ref, booted == im.Digest:
		return true
	}
	return controller.DigestOf(booted) == im.Digest
}

func (c *Checker) unconverged() []string {
	var out []string
	for _, p := range c.world.Pools() {
		if !p.converged {
			out = append(out, "BootcNodePool/"+p.Name)
		}
	}
	return out
}

func (c *Checker) poolObjects() []string {
	var out []string
	for _, p := range c.world.Pools() {
		out = append(out, "BootcNodePool/"+p.Name)
	}
	return out
}

// Violations returns the recorded violations in the order they happened.
func (c *Checker) Violations() []Violation { return c.violations }

// Count returns how many violations of name happened, recorded or not.
func (c *Checker) Count(name string) int { return c.caught[name] }

func nodeObjects(names []string) []string {
	const max = 10
	out := make([]string, 0, min(len(names), max))
	for i, n := range names {
		if i == max {
			out = append(out, fmt.Sprintf("... and %d more", len(names)-max))
			break
		}
		out = append(out, "Node/"+n)
	}
	return out
}

func short(items []string) string {
	const max = 5
	if len(items) > max {
		return strings.Join(items[:max], ", ") + fmt.Sprintf(" and %d more", len(items)-max)
	}
	return strings.Join(items, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
