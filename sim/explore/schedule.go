// Package explore runs scenarios under many seeds with randomised fault and
// action schedules, checks every invariant, writes each violation as a
// self-contained scenario file that `bootroll scenario run` replays
// exactly, and shrinks it to a minimal reproducer.
//
// A schedule is a list of items; an item is one or more scenario entries
// (events or faults at explicit times, with explicit targets) that are
// added and removed together (a pause with its resume). Every explored run
// is built as scenario YAML and loaded by the ordinary loader, so the file
// written for a violation is exactly what ran.
package explore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/scenario"
)

// Category is a family of faults and actions that exploration may draw.
type Category string

// The categories. A category with no generator that fits a scenario (say
// karpenter without a karpenter section) draws nothing for it.
const (
	// API: API errors (409, 429, 500, timeouts) and latency.
	API Category = "api"
	// Stale: delayed and dropped watch events, stale caches.
	Stale Category = "stale"
	// Crash: controller and daemon crashes and restarts.
	Crash Category = "crash"
	// Host: node crashes, power cycles, slow or failed boots, registry and
	// disk faults.
	Host Category = "host"
	// Human: an operator's edits: pool image (revert, flip-flop), pause,
	// workload scale, nodes added and removed.
	Human Category = "human"
	// Karpenter: Karpenter's own actions (drift from a NodeClass change).
	Karpenter Category = "karpenter"
	// Clock: a node's clock ahead of or behind the cluster's (clockSkew).
	// A category of its own, added last, so schedules drawn with the
	// others named stay as they were.
	Clock Category = "clock"
)

// AllCategories lists every category, in the order they are drawn from.
var AllCategories = []Category{API, Stale, Crash, Host, Human, Karpenter, Clock}

// ParseCategories parses a comma-separated list of categories; "all" is
// every one.
func ParseCategories(s string) ([]Category, error) {
	var out []Category
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if part == "all" {
			return slices.Clone(AllCategories), nil
		}
		c := Category(part)
		if !slices.Contains(AllCategories, c) {
			names := make([]string, len(AllCategories))
			for i, a := range AllCategories {
				names[i] = string(a)
			}
			return nil, fmt.Errorf("--faults: unknown category %q; want a comma-separated list of %s, or all", part, strings.Join(names, ", "))
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--faults: no category given; want a comma-separated list of categories, or all")
	}
	return out, nil
}

// Section is where an entry goes in the scenario file.
type Section string

// The sections an entry may go to.
const (
	Events  Section = "events"
	Faults  Section = "faults"
	Setting Section = "setting"
)

// Entry is one event or fault at an explicit time, or a fault in effect
// over [At, Until), or a top-level setting of the run (Section Setting,
// Key the field, Body["value"] its value).
type Entry struct {
	Section Section
	At      time.Duration
	Until   time.Duration
	// Key is the event's or fault's kind, the YAML key (setPoolImage,
	// nodeCrash, ...); Body its value.
	Key  string
	Body map[string]any
	// Opens is, for a setPool that gives the pool a maintenance window,
	// when the window first opens (from the start; the window's start is
	// a time of day in Body): nothing of the rollout moves before it, so
	// the run's limit must reach past it (End).
	Opens time.Duration
}

// Item is what a generator draws: entries that are added and removed
// together.
type Item struct {
	Category Category
	Entries  []Entry
}

// End is the latest time an item's entries reach, counting a fault's
// downFor and the opening of a maintenance window an entry sets.
func (it Item) End() time.Duration {
	var end time.Duration
	for _, e := range it.Entries {
		t := max(e.At, e.Until, e.Opens)
		for _, k := range []string{"downFor", "offFor", "duration", "for"} {
			if d, ok := e.Body[k].(string); ok {
				if dd, err := time.ParseDuration(d); err == nil {
					t = max(t, e.At+dd)
				}
			}
		}
		end = max(end, t)
	}
	return end
}

// String describes an item for a person: "3m10s nodeCrash{node: w-2, downFor: 5m}".
func (it Item) String() string {
	parts := make([]string, len(it.Entries))
	for i, e := range it.Entries {
		switch {
		case e.Section == Setting:
			parts[i] = fmt.Sprintf("%s: %v", e.Key, e.Body["value"])
		case e.Until > 0:
			parts[i] = fmt.Sprintf("%s-%s %s%s", e.At, e.Until, e.Key, flow(e.Body))
		default:
			parts[i] = fmt.Sprintf("%s %s%s", e.At, e.Key, flow(e.Body))
		}
	}
	return strings.Join(parts, " + ")
}

// flow renders a body as YAML flow text.
func flow(body map[string]any) string {
	var n yaml.Node
	if err := n.Encode(bodyValue(body)); err != nil {
		return fmt.Sprint(body)
	}
	setFlow(&n)
	b, err := yaml.Marshal(&n)
	if err != nil {
		return fmt.Sprint(body)
	}
	return strings.TrimSpace(string(b))
}

func setFlow(n *yaml.Node) {
	n.Style |= yaml.FlowStyle
	for _, c := range n.Content {
		setFlow(c)
	}
}

// Schedule is the items of one run, in time order.
type Schedule []Item

// End is when the last item's effect ends.
func (s Schedule) End() time.Duration {
	var end time.Duration
	for _, it := range s {
		end = max(end, it.End())
	}
	return end
}

// world is what generators know of a scenario.
type world struct {
	sc      *scenario.Scenario
	horizon time.Duration
	nodes   []string // nodes that exist at the start, <group>-<i>
	// pools are the document's bootroll.pools entries, by pool name, for
	// recreating a deleted pool as it was.
	pools map[string]*yaml.Node
}

func newWorld(sc *scenario.Scenario, doc *document, horizon time.Duration) *world {
	w := &world{sc: sc, horizon: horizon, pools: map[string]*yaml.Node{}}
	if doc != nil {
		if br := get(doc.root, "bootroll"); br != nil && br.Kind == yaml.MappingNode {
			if ps := get(br, "pools"); ps != nil && ps.Kind == yaml.SequenceNode {
				for _, pn := range ps.Content {
					if name := get(pn, "name"); name != nil {
						w.pools[name.Value] = pn
					}
				}
			}
		}
	}
	for _, g := range sc.NodeGroups {
		for i := range g.Count {
			w.nodes = append(w.nodes, fmt.Sprintf("%s-%d", g.Name, i))
		}
	}
	return w
}

// generator draws one item of its category for a scenario, or reports that
// it has nothing to draw there.
type generator struct {
	cat  Category
	name string
	// key is the entry key the generator draws when it differs from name.
	key  string
	draw func(w *world, rng *rand.Rand) (Item, bool)
}

// fitsOnly holds, by generator name, whether a generator is drawn from at
// all for a scenario: a generator added later that fits only a few
// scenarios is left out of the others, so their draws stay as they were.
var fitsOnly = map[string]func(w *world) bool{
	"nodeConditionAfterBoot":     func(w *world) bool { return len(w.conditionChecks()) > 0 },
	"daemonSetNotReadyAfterBoot": func(w *world) bool { return len(w.daemonSetChecks()) > 0 },
	"readyFlapsAfterBoot":        func(w *world) bool { return w.readyForChecked() },
}

// at draws a time in [0, horizon), rounded to milliseconds.
func (w *world) at(rng *rand.Rand) time.Duration {
	h := max(w.horizon, time.Minute)
	return (time.Duration(rng.Int64N(int64(h))) / time.Millisecond) * time.Millisecond
}

// between draws a duration in [lo, hi], rounded to seconds.
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	d := lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
	return d.Round(time.Second)
}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// conditionChecks are the node condition checks of the scenario's pools,
// in pool order, when it has nodes.
func (w *world) conditionChecks() []v1alpha1.NodeConditionCheck {
	var out []v1alpha1.NodeConditionCheck
	for _, p := range w.sc.Bootroll.Pools {
		if len(w.nodes) > 0 {
			out = append(out, p.HealthChecks.NodeConditions...)
		}
	}
	return out
}

// daemonSetChecks are the scenario's DaemonSets (all in kube-system) that
// a pool's health checks name, when it has nodes.
func (w *world) daemonSetChecks() []string {
	var out []string
	for _, p := range w.sc.Bootroll.Pools {
		for _, d := range p.HealthChecks.DaemonSets {
			if len(w.nodes) > 0 && d.Namespace == "kube-system" && !slices.Contains(out, d.Name) &&
				slices.ContainsFunc(w.sc.DaemonSets, func(s scenario.DaemonSet) bool { return s.Name == d.Name }) {
				out = append(out, d.Name)
			}
		}
	}
	return out
}

// readyForChecked reports whether a pool has healthChecks.readyFor and the
// scenario has nodes.
func (w *world) readyForChecked() bool {
	for _, p := range w.sc.Bootroll.Pools {
		if p.HealthChecks.ReadyFor != nil && len(w.nodes) > 0 {
			return true
		}
	}
	return false
}

func one(cat Category, sec Section, at time.Duration, key string, body map[string]any) Item {
	return Item{Category: cat, Entries: []Entry{{Section: sec, At: at, Key: key, Body: body}}}
}

// span draws a window [from, to) inside the horizon, at least a minute
// long.
func (w *world) span(rng *rand.Rand) (time.Duration, time.Duration) {
	from := w.at(rng)
	return from, from + between(rng, time.Minute, max(w.horizon/2, 2*time.Minute))
}

func spanned(cat Category, from, until time.Duration, key string, body map[string]any) Item {
	return Item{Category: cat, Entries: []Entry{{Section: Faults, At: from, Until: until, Key: key, Body: body}}}
}

// subset draws a non-empty subset of xs, in xs order.
func subset[T any](rng *rand.Rand, xs []T) []T {
	var out []T
	for len(out) == 0 {
		for _, x := range xs {
			if rng.IntN(2) == 0 {
				out = append(out, x)
			}
		}
	}
	return out
}

var (
	apiVerbs = []string{"get", "list", "create", "update", "patch", "delete", "update/status", "patch/status", "create/eviction"}
	apiCodes = []string{"conflict", "tooManyRequests", "internalError", "timeout"}
	whos     = []string{"controller", "daemon", "all"}
)

// generators are every fault and action exploration draws. A new kind of
// fault or action is added here once and every scenario gets it.
var generators = []generator{
	{API, "apiErrors", "", func(w *world, rng *rand.Rand) (Item, bool) {
		from, until := w.span(rng)
		verbs, codes := subset(rng, apiVerbs), subset(rng, apiCodes)
		if !slices.ContainsFunc(verbs, func(v string) bool { return v != "get" && v != "list" }) && slices.Equal(codes, []string{"conflict"}) {
			// A conflict fails no read: the fault would fail nothing, and
			// the scenario refuses it.
			codes = append(codes, pick(rng, apiCodes[1:]))
		}
		body := map[string]any{
			"verbs": verbs,
			"codes": codes,
			"rate":  float64(1+rng.IntN(30)) / 100,
			"who":   pick(rng, whos),
		}
		if rng.IntN(3) == 0 {
			body["latency"] = map[string]any{"dist": "uniform", "min": "0s", "max": between(rng, 10*time.Millisecond, 2*time.Second).String()}
		}
		return spanned(API, from, until, "apiErrors", body), true
	}},
	{Stale, "watchFaults", "", func(w *world, rng *rand.Rand) (Item, bool) {
		from, until := w.span(rng)
		body := map[string]any{"who": pick(rng, whos)}
		if rng.IntN(2) == 0 {
			body["drop"] = float64(1+rng.IntN(20)) / 100
		}
		if _, ok := body["drop"]; !ok || rng.IntN(2) == 0 {
			body["delay"] = between(rng, time.Second, 30*time.Second).String()
		}
		return spanned(Stale, from, until, "watchFaults", body), true
	}},
	{Stale, "staleProfile", "profile", func(w *world, rng *rand.Rand) (Item, bool) {
		return Item{Category: Stale, Entries: []Entry{{Section: Setting, Key: "profile", Body: map[string]any{"value": "stale"}}}}, true
	}},
	{Crash, "controllerCrash", "", func(w *world, rng *rand.Rand) (Item, bool) {
		from, until := w.span(rng)
		body := map[string]any{"downFor": between(rng, 0, time.Minute).String()}
		if rng.IntN(2) == 0 {
			body["afterWrites"] = 1 + rng.IntN(40)
		} else {
			body["rate"] = float64(1+rng.IntN(10)) / 100
		}
		return spanned(Crash, from, until, "controllerCrash", body), true
	}},
	{Crash, "daemonWriteCrash", "", func(w *world, rng *rand.Rand) (Item, bool) {
		from, until := w.span(rng)
		body := map[string]any{"downFor": between(rng, time.Second, time.Minute).String()}
		if rng.IntN(2) == 0 {
			body["afterWrites"] = 1 + rng.IntN(10)
		} else {
			body["rate"] = float64(1+rng.IntN(10)) / 100
		}
		if rng.IntN(2) == 0 {
			body["hostCalls"] = true // a crash may fall right after a host call too
		}
		return spanned(Crash, from, until, "daemonWriteCrash", body), true
	}},
	{Crash, "controllerRestart", "", func(w *world, rng *rand.Rand) (Item, bool) {
		return one(Crash, Faults, w.at(rng), "controllerRestart", map[string]any{"downFor": between(rng, 0, 2*time.Minute).String()}), true
	}},
	{Crash, "daemonCrash", "", func(w *world, rng *rand.Rand) (Item, bool) {
		if len(w.nodes) == 0 {
			return Item{}, false
		}
		return one(Crash, Faults, w.at(rng), "daemonCrash", map[string]any{"node": pick(rng, w.nodes), "downFor": between(rng, 5*time.Second, 2*time.Minute).String()}), true
	}},
	{Host, "nodeCrash", "", func(w *world, rng *rand.Rand) (Item, bool) {
		if len(w.nodes) == 0 {
			return Item{}, false
		}
		return one(Host, Faults, w.at(rng), "nodeCrash", map[string]any{"node": pick(rng, w.nodes), "downFor": between(rng, 30*time.Second, 10*time.Minute).String()}), true
	}},
	{Human, "setPoolImage", "", func(w *world, rng *rand.Rand) (Item, bool) {
		if len(w.sc.Bootroll.Pools) == 0 || len(w.sc.Images) < 2 {
			return Item{}, false
		}
		p := pick(rng, w.sc.Bootroll.Pools)
		im := pick(rng, w.sc.Images)
		return one(Human, Events, w.at(rng), "setPoolImage", map[string]any{"pool": p.Name, "image": im.Name}), true
	}},
	{Human, "revertPoolImage", "setPoolImage", func(w *world, rng *rand.Rand) (Item, bool) {
		// Flip-flop: to another image and back to the pool's own.
		if len(w.sc.Bootroll.Pools) == 0 || len(w.sc.Images) < 2 {
			return Item{}, false
		}
		p := pick(rng, w.sc.Bootroll.Pools)
		var others []string
		for _, im := range w.sc.Images {
			if im.Name != p.Image {
				others = append(others, im.Name)
			}
		}
		if len(others) == 0 {
			return Item{}, false
		}
		t := w.at(rng)
		back := t + between(rng, time.Second, 5*time.Minute)
		return Item{Category: Human, Entries: []Entry{
			{Section: Events, At: t, Key: "setPoolImage", Body: map[string]any{"pool": p.Name, "image": pick(rng, others)}},
			{Section: Events, At: back, Key: "setPoolImage", Body: map[string]any{"pool": p.Name, "image": p.Image}},
		}}, true
	}},
	{Human, "pause", "", func(w *world, rng *rand.Rand) (Item, bool) {
		if len(w.sc.Bootroll.Pools) == 0 {
			return Item{}, false
		}
		p := pick(rng, w.sc.Bootroll.Pools)
		t := w.at(rng)
		return Item{Category: Human, Entries: []Entry{
			{Section: Events, At: t, Key: "pause", Body: map[string]any{"pool": p.Name, "paused": true}},
			{Section: Events, At: t + between(rng, time.Second, 10*time.Minute), Key: "pause", Body: map[string]any{"pool": p.Name, "paused": false}},
		}}, true
	}},
	{Human, "scaleWorkload", "", func(w *world, rng *rand.Rand) (Item, bool) {
		if len(w.sc.Workloads) == 0 {
			return Item{}, false
		}
		wl := pick(rng, w.sc.Workloads)
		n := max(0, wl.Replicas+rng.IntN(wl.Replicas+3)-(wl.Replicas+2)/2)
		return one(Human, Events, w.at(rng), "scaleWorkload", map[string]any{"workload": wl.Name, "replicas": n}), true
	}},
	{Human, "addNodes", "", func(w *world, rng *rand.Rand) (Item, bool) {
		if len(w.sc.NodeGroups) == 0 {
			return Item{}, false
		}
		g := pick(rng, w.sc.NodeGroups)
		return one(Human, Events, w.at(rng), "addNodes", map[string]any{"group": g.Name, "count": 1 + rng.IntN(2)}), true
	}},
	{Human, "removeNodes", "", func(w *world, rng *rand.Rand) (Item, bool) {
		var gs []scenario.NodeGroup
		for _, g := range w.sc.NodeGroups {
			if g.Count > 1 {
				gs = append(gs, g)
			}
		}
		if len(gs) == 0 {
			return Item{}, false
		}
		g := pick(rng, gs)
		return one(Human, Events, w.at(rng), "removeNodes", map[string]any{"group": g.Name, "count": 1}), true
	}},
	{Karpenter, "setNodeClassImage", "", func(w *world, rng *rand.Rand) (Item, bool) {
		if w.sc.Karpenter == nil || len(w.sc.Karpenter.NodeClasses) == 0 {
			return Item{}, false
		}
		nc := pick(rng, w.sc.Karpenter.NodeClasses)
		im := pick(rng, w.sc.Images)
		return one(Karpenter, Events, w.at(rng), "setNodeClassImage", map[string]any{"nodeClass": nc.Name, "image": im.Name}), true
	}},
	{Human, "deletePool", "", func(w *world, rng *rand.Rand) (Item, bool) {
		if len(w.sc.Bootroll.Pools) == 0 {
			return Item{}, false
		}
		p := pick(rng, w.sc.Bootroll.Pools)
		t := w.at(rng)
		it := one(Human, Events, t, "deletePool", map[string]any{"pool": p.Name})
		if pn := w.pools[p.Name]; pn != nil && rng.IntN(2) == 0 {
			it.Entries = append(it.Entries, Entry{Section: Events, At: t + between(rng, time.Second, 10*time.Minute), Key: "createPool", Body: map[string]any{"": pn}})
		}
		return it, true
	}},
	{Human, "setPool", "", func(w *world, rng *rand.Rand) (Item, bool) {
		if len(w.sc.Bootroll.Pools) == 0 {
			return Item{}, false
		}
		p := pick(rng, w.sc.Bootroll.Pools)
		body := map[string]any{"pool": p.Name}
		windowsAt := false
		for len(body) == 1 && !windowsAt {
			if rng.IntN(3) == 0 {
				body["maxUnavailable"] = pick(rng, []any{1, 2, 3, "25%", "50%"})
			}
			if rng.IntN(4) == 0 {
				body["maxStaging"] = rng.IntN(4)
			}
			if rng.IntN(4) == 0 {
				body["failurePolicy"] = map[string]any{"action": pick(rng, []string{"Halt", "Rollback"}), "maxFailures": 1 + rng.IntN(2)}
			}
			if rng.IntN(5) == 0 {
				body["drainTimeout"] = between(rng, time.Minute, 15*time.Minute).String()
			}
			if rng.IntN(5) == 0 {
				body["healthTimeout"] = between(rng, 3*time.Minute, 20*time.Minute).String()
			}
			if rng.IntN(5) == 0 {
				windowsAt = true
			}
		}
		t := w.at(rng)
		var opens time.Duration
		if windowsAt {
			// No window, or a daily one that opens within an hour of the
			// edit (a window that opens only after the run's limit would
			// stall the rollout by design, which is no finding).
			if rng.IntN(2) == 0 {
				body["windows"] = []any{}
			} else {
				open := w.sc.Start.Add(t + between(rng, 0, time.Hour)).UTC()
				body["windows"] = []any{map[string]any{"start": fmt.Sprintf("%02d:%02d", open.Hour(), open.Minute()), "duration": between(rng, time.Hour, 4*time.Hour).String()}}
				opens = open.Truncate(time.Minute).Sub(w.sc.Start) + time.Minute
			}
		}
		it := one(Human, Events, t, "setPool", body)
		it.Entries[0].Opens = opens
		return it, true
	}},
	{Human, "relabelNode", "", func(w *world, rng *rand.Rand) (Item, bool) {
		// A node leaves its pool (a selector label removed) and, half the
		// time, comes back.
		var cands []string
		var keys []string
		for _, g := range w.sc.NodeGroups {
			for _, p := range w.sc.Bootroll.Pools {
				for k, v := range p.NodeSelector {
					if g.Labels[k] == v {
						for i := range g.Count {
							cands = append(cands, fmt.Sprintf("%s-%d", g.Name, i))
							keys = append(keys, k+"="+v)
						}
					}
				}
			}
		}
		if len(cands) == 0 {
			return Item{}, false
		}
		i := rng.IntN(len(cands))
		k, v, _ := strings.Cut(keys[i], "=")
		t := w.at(rng)
		it := one(Human, Events, t, "relabelNode", map[string]any{"node": cands[i], "remove": []string{k}})
		if rng.IntN(2) == 0 {
			it.Entries = append(it.Entries, Entry{Section: Events, At: t + between(rng, time.Second, 10*time.Minute), Key: "relabelNode", Body: map[string]any{"node": cands[i], "set": map[string]string{k: v}}})
		}
		return it, true
	}},
	{Human, "deleteNode", "", nodeAction("deleteNode")},
	{Human, "deleteBootcNode", "", nodeAction("deleteBootcNode")},
	{Human, "cordonNode", "", func(w *world, rng *rand.Rand) (Item, bool) {
		if len(w.nodes) == 0 {
			return Item{}, false
		}
		n, t := pick(rng, w.nodes), w.at(rng)
		it := one(Human, Events, t, "cordonNode", map[string]any{"node": n})
		if rng.IntN(3) != 0 {
			it.Entries = append(it.Entries, Entry{Section: Events, At: t + between(rng, time.Second, 15*time.Minute), Key: "uncordonNode", Body: map[string]any{"node": n}})
		}
		return it, true
	}},
	{Human, "uncordonNode", "", nodeAction("uncordonNode")},
	{Human, "annotateNode", "", func(w *world, rng *rand.Rand) (Item, bool) {
		// An operator protects a node from Karpenter by hand and, half
		// the time, lifts it later: bootroll must leave it as they did.
		if len(w.nodes) == 0 {
			return Item{}, false
		}
		n, t := pick(rng, w.nodes), w.at(rng)
		key := pick(rng, []string{"karpenter.sh/do-not-disrupt", "karpenter.sh/do-not-repair"})
		it := one(Human, Events, t, "annotateNode", map[string]any{"node": n, "set": map[string]string{key: "true"}})
		if rng.IntN(2) == 0 {
			it.Entries = append(it.Entries, Entry{Section: Events, At: t + between(rng, time.Second, 15*time.Minute), Key: "annotateNode", Body: map[string]any{"node": n, "remove": []string{key}}})
		}
		return it, true
	}},
	{Human, "setPDB", "", func(w *world, rng *rand.Rand) (Item, bool) {
		if len(w.sc.Workloads) == 0 {
			return Item{}, false
		}
		wl := pick(rng, w.sc.Workloads)
		body := map[string]any{"workload": wl.Name}
		if rng.IntN(2) == 0 {
			body["maxUnavailable"] = rng.IntN(4)
		} else {
			body["minAvailable"] = pick(rng, []any{0, 1, "50%", "90%", "100%"})
		}
		// The PDB is set back later: one that allows no disruption for
		// good stalls every drain by design, which is no finding.
		t := w.at(rng)
		it := one(Human, Events, t, "setPDB", body)
		back := Entry{Section: Events, At: t + between(rng, time.Minute, 20*time.Minute), Key: "deletePDB", Body: map[string]any{"workload": wl.Name}}
		if pdb := wl.PDB; pdb != nil {
			back.Key, back.Body = "setPDB", map[string]any{"workload": wl.Name}
			if pdb.MaxUnavailable != nil {
				back.Body["maxUnavailable"] = intOrString(*pdb.MaxUnavailable)
			} else if pdb.MinAvailable != nil {
				back.Body["minAvailable"] = intOrString(*pdb.MinAvailable)
			}
		}
		it.Entries = append(it.Entries, back)
		return it, true
	}},
	{Human, "deletePDB", "", func(w *world, rng *rand.Rand) (Item, bool) {
		var ws []string
		for _, wl := range w.sc.Workloads {
			if wl.PDB != nil {
				ws = append(ws, wl.Name)
			}
		}
		if len(ws) == 0 {
			return Item{}, false
		}
		return one(Human, Events, w.at(rng), "deletePDB", map[string]any{"workload": pick(rng, ws)}), true
	}},
	{Host, "powerCycle", "", func(w *world, rng *rand.Rand) (Item, bool) {
		if len(w.nodes) == 0 {
			return Item{}, false
		}
		return one(Host, Faults, w.at(rng), "powerCycle", map[string]any{"node": pick(rng, w.nodes), "offFor": between(rng, 5*time.Second, 5*time.Minute).String()}), true
	}},
	{Host, "longReboot", "", func(w *world, rng *rand.Rand) (Item, bool) {
		if len(w.nodes) == 0 {
			return Item{}, false
		}
		return one(Host, Faults, w.at(rng), "longReboot", map[string]any{"node": pick(rng, w.nodes), "duration": between(rng, 10*time.Minute, time.Hour).String()}), true
	}},
	{Clock, "clockSkew", "", func(w *world, rng *rand.Rand) (Item, bool) {
		if len(w.nodes) == 0 {
			return Item{}, false
		}
		// From a boot's first seconds before chrony syncs to a clock left
		// minutes off, either way.
		offsets := []time.Duration{-90 * time.Second, -20 * time.Second, -3 * time.Second, -1500 * time.Millisecond, 2 * time.Second, 30 * time.Second, 5 * time.Minute}
		body := map[string]any{"node": pick(rng, w.nodes), "offset": pick(rng, offsets).String()}
		if rng.IntN(2) == 0 {
			body["for"] = between(rng, time.Minute, 30*time.Minute).String()
		}
		return one(Clock, Faults, w.at(rng), "clockSkew", body), true
	}},
	{Host, "bootFailure", "", func(w *world, rng *rand.Rand) (Item, bool) {
		if len(w.nodes) == 0 {
			return Item{}, false
		}
		modes := []string{"FallBack", "NeverReady", "Flapping", "NetworkNotReady", "CrashLoop"}
		return one(Host, Faults, w.at(rng), "bootFailure", map[string]any{"node": pick(rng, w.nodes), "mode": pick(rng, modes)}), true
	}},
	{Host, "registryOutage", "", func(w *world, rng *rand.Rand) (Item, bool) {
		return one(Host, Faults, w.at(rng), "registryOutage", map[string]any{"for": between(rng, 30*time.Second, 20*time.Minute).String()}), true
	}},
	{Host, "slowPulls", "", func(w *world, rng *rand.Rand) (Item, bool) {
		return one(Host, Faults, w.at(rng), "slowPulls", map[string]any{"for": between(rng, time.Minute, 20*time.Minute).String(), "factor": 2 + rng.IntN(30)}), true
	}},
	{Host, "diskFill", "", func(w *world, rng *rand.Rand) (Item, bool) {
		if len(w.nodes) == 0 {
			return Item{}, false
		}
		body := map[string]any{"node": pick(rng, w.nodes), "size": fmt.Sprintf("%dGi", 1+rng.IntN(100))}
		if rng.IntN(2) == 0 {
			body["for"] = between(rng, time.Minute, 30*time.Minute).String()
		}
		return one(Host, Faults, w.at(rng), "diskFill", body), true
	}},
	// Health faults, for pools with healthChecks: each fits only a
	// scenario with a pool that has the check it can fail (fitsOnly).
	{Host, "nodeConditionAfterBoot", "", func(w *world, rng *rand.Rand) (Item, bool) {
		c := pick(rng, w.conditionChecks())
		bad := "True"
		if c.Status == "True" {
			bad = "False"
		}
		body := map[string]any{"node": pick(rng, w.nodes), "type": c.Type, "status": bad}
		if rng.IntN(2) == 0 {
			body["for"] = between(rng, 30*time.Second, 10*time.Minute).String()
		}
		return one(Host, Faults, w.at(rng), "nodeConditionAfterBoot", body), true
	}},
	{Host, "daemonSetNotReadyAfterBoot", "", func(w *world, rng *rand.Rand) (Item, bool) {
		body := map[string]any{"node": pick(rng, w.nodes), "daemonSet": pick(rng, w.daemonSetChecks())}
		if rng.IntN(2) == 0 {
			body["for"] = between(rng, 30*time.Second, 10*time.Minute).String()
		}
		return one(Host, Faults, w.at(rng), "daemonSetNotReadyAfterBoot", body), true
	}},
	{Host, "readyFlapsAfterBoot", "", func(w *world, rng *rand.Rand) (Item, bool) {
		return one(Host, Faults, w.at(rng), "readyFlapsAfterBoot", map[string]any{"node": pick(rng, w.nodes), "flaps": 1 + rng.IntN(4),
			"ready": between(rng, 10*time.Second, 2*time.Minute).String(), "notReady": between(rng, 10*time.Second, time.Minute).String()}), true
	}},
	{Karpenter, "karpenterCRDs", "", func(w *world, rng *rand.Rand) (Item, bool) {
		if w.sc.Karpenter == nil {
			return Item{}, false
		}
		t := w.at(rng)
		it := one(Karpenter, Events, t, "karpenterCRDs", map[string]any{"installed": false})
		if rng.IntN(3) != 0 {
			it.Entries = append(it.Entries, Entry{Section: Events, At: t + between(rng, time.Second, 10*time.Minute), Key: "karpenterCRDs", Body: map[string]any{"installed": true}})
		}
		return it, true
	}},
}

// nodeAction draws an action whose body names one node.
func nodeAction(key string) func(w *world, rng *rand.Rand) (Item, bool) {
	return func(w *world, rng *rand.Rand) (Item, bool) {
		if len(w.nodes) == 0 {
			return Item{}, false
		}
		return one(Human, Events, w.at(rng), key, map[string]any{"node": pick(rng, w.nodes)}), true
	}
}

// MaxItems is the most items one run's schedule holds.
const MaxItems = 4

// draw makes the schedule of one run: 1 to MaxItems items from the
// generators of the given categories that fit the scenario, in time order.
func draw(w *world, cats []Category, rng *rand.Rand) Schedule {
	var gens []generator
	for _, g := range generators {
		if fits := fitsOnly[g.name]; slices.Contains(cats, g.cat) && (fits == nil || fits(w)) {
			gens = append(gens, g)
		}
	}
	if len(gens) == 0 {
		return nil
	}
	n := 1 + rng.IntN(MaxItems)
	var s Schedule
	for tries := 0; len(s) < n && tries < 4*MaxItems; tries++ {
		if it, ok := pick(rng, gens).draw(w, rng); ok {
			s = append(s, it)
		}
	}
	slices.SortStableFunc(s, func(a, b Item) int { return int(a.Entries[0].At - b.Entries[0].At) })
	return s
}

// intOrString is v as YAML writes it: a number or a percentage string.
func intOrString(v intstr.IntOrString) any {
	if v.Type == intstr.Int {
		return int(v.IntVal)
	}
	return v.StrVal
}
