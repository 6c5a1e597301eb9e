package scenario

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/imageref"
)

// validator checks what the types and tags cannot: references between
// sections, uniqueness, and values that depend on other values.
type validator struct {
	*positions
	s *Scenario

	images, pools, groups, workloads, nodeClasses, nodePools nameSet
	pinnedSets                                               nameSet
	// added counts the nodes events may add to each group, for node names.
	added map[string]int
	// decodeErrs are the errors found while decoding.
	decodeErrs Errors
}

// nameSet is the names of a list's items.
type nameSet struct {
	names map[string]bool
	// broken is set when an item failed to decode, so the names may be
	// incomplete and references into the list are not checked.
	broken bool
}

// validate reports every semantic error of a decoded scenario. It also runs
// after decoding errors, to report as much as it can at once, but then it
// drops what it finds at, above, below or beside a field that failed to
// decode (which may hold a zero or out-of-range value), and it does not
// check references into lists with an item that failed to decode.
func validate(s *Scenario, pos *positions) {
	decodeErrs := slices.Clone(pos.errs)
	vpos := newPositions(pos.file, pos.origins)
	vpos.lines, vpos.sets = pos.lines, pos.sets
	v := &validator{positions: vpos, s: s, added: map[string]int{}, decodeErrs: decodeErrs}
	v.check()
	for _, e := range vpos.errs {
		if !relatedToAny(e.Field, decodeErrs) {
			pos.errs = append(pos.errs, e)
		}
	}
}

// relatedToAny reports whether path is, contains or is inside the field of
// one of errs, or (below the top level) is a sibling of it, as checks
// compare siblings.
func relatedToAny(path string, errs Errors) bool {
	for _, e := range errs {
		if e.Field == "" || within(path, e.Field) || within(e.Field, path) {
			return true
		}
		if parent := parentPath(e.Field); parent != "" && within(path, parent) {
			return true
		}
	}
	return false
}

// within reports whether path is inner or a field inside it.
func within(path, inner string) bool {
	return path == inner || strings.HasPrefix(path, inner+".") || strings.HasPrefix(path, inner+"[")
}

// MaxNodes bounds the nodes of a run: the node groups' counts and the
// nodes addNodes events add, together. MaxWorkloadPods bounds the
// workloads' replicas together (the larger of each workload's start and
// scaleWorkload counts). A run of MaxNodes nodes with 3 workload pods and
// a DaemonSet pod a node keeps about 5 GiB live (docs/twin-performance.md):
// more would not fit the machines bootroll whatif is sized for.
const (
	MaxNodes        = 100000
	MaxWorkloadPods = 500000
)

// totals refuses a scenario whose nodes or workload pods together exceed
// MaxNodes or MaxWorkloadPods, naming the field that crosses the bound.
func (v *validator) totals() {
	s := v.s
	nodes := 0
	for i, g := range s.NodeGroups {
		nodes += g.Count
		if nodes > MaxNodes {
			v.errorf(joinKey(joinIndex("nodeGroups", i), "count"), "the node groups have %d nodes up to here, more than the %d a run accepts", nodes, MaxNodes)
			return
		}
	}
	for i, e := range s.Events {
		if e.AddNodes == nil {
			continue
		}
		nodes += e.AddNodes.Count
		if nodes > MaxNodes {
			v.errorf(joinKey(joinKey(joinIndex("events", i), "addNodes"), "count"), "with the nodes added up to here the run has %d nodes, more than the %d a run accepts", nodes, MaxNodes)
			return
		}
	}
	most := map[string]int{}
	for _, w := range s.Workloads {
		most[w.Name] = w.Replicas
	}
	for _, e := range s.Events {
		if sw := e.ScaleWorkload; sw != nil {
			most[sw.Workload] = max(most[sw.Workload], sw.Replicas)
		}
	}
	pods := 0
	for i, w := range s.Workloads {
		pods += most[w.Name]
		if pods > MaxWorkloadPods {
			v.errorf(joinKey(joinIndex("workloads", i), "replicas"), "the workloads have up to %d pods up to here (with scaleWorkload events), more than the %d a run accepts", pods, MaxWorkloadPods)
			return
		}
	}
}

func (v *validator) check() {
	s := v.s
	if s.Limit <= 0 {
		v.errorf("limit", "invalid value %s: must be more than 0s", s.Limit)
	}
	v.images = v.names("images", len(s.Images), func(i int) string { return s.Images[i].Name })
	v.groups = v.names("nodeGroups", len(s.NodeGroups), func(i int) string { return s.NodeGroups[i].Name })
	v.workloads = v.names("workloads", len(s.Workloads), func(i int) string { return s.Workloads[i].Name })
	v.names("daemonSets", len(s.DaemonSets), func(i int) string { return s.DaemonSets[i].Name })
	v.pools = v.names("bootroll.pools", len(s.Bootroll.Pools), func(i int) string { return s.Bootroll.Pools[i].Name })
	v.pinnedSets = v.names("pinnedImageSets", len(s.PinnedImageSets), func(i int) string { return s.PinnedImageSets[i].Name })
	v.names("negativeControls", len(s.NegativeControls), func(i int) string { return s.NegativeControls[i].Name })
	if k := s.Karpenter; k != nil {
		v.nodeClasses = v.names("karpenter.nodeClasses", len(k.NodeClasses), func(i int) string { return k.NodeClasses[i].Name })
		v.nodePools = v.names("karpenter.nodePools", len(k.NodePools), func(i int) string { return k.NodePools[i].Name })
	}
	for _, e := range s.Events {
		if e.AddNodes != nil {
			v.added[e.AddNodes.Group] += e.AddNodes.Count
		}
		// Pools that events create may be referred to like the others.
		if e.CreatePool != nil && v.pools.names != nil {
			v.pools.names[e.CreatePool.Name] = true
		}
	}

	for i, im := range s.Images {
		v.image(joinIndex("images", i), im)
	}
	v.distribution("host.stageOverhead", s.Host.StageOverhead)
	v.distribution("host.reboot", s.Host.Reboot)
	v.distribution("host.daemonStartup", s.Host.DaemonStartup)
	if s.Host.PullBandwidth.Sign() <= 0 {
		v.errorf("host.pullBandwidth", "invalid value %s: must be more than 0", s.Host.PullBandwidth.String())
	}
	for i, g := range s.NodeGroups {
		v.nodeGroup(joinIndex("nodeGroups", i), g)
	}
	v.totals()
	for i, w := range s.Workloads {
		p := joinIndex("workloads", i)
		v.resources(joinKey(p, "requests"), w.Requests)
		v.labels(joinKey(p, "nodeSelector"), w.NodeSelector)
	}
	for i, ds := range s.DaemonSets {
		p := joinIndex("daemonSets", i)
		v.resources(joinKey(p, "requests"), ds.Requests)
		v.labels(joinKey(p, "nodeSelector"), ds.NodeSelector)
	}
	for i, pl := range s.Bootroll.Pools {
		v.pool(joinIndex("bootroll.pools", i), pl)
	}
	if s.Karpenter != nil {
		v.karpenter("karpenter", s.Karpenter)
	}
	for i, ps := range s.PinnedImageSets {
		v.pinnedImageSet(joinIndex("pinnedImageSets", i), ps)
	}
	for i, e := range s.Events {
		v.event(joinIndex("events", i), e)
	}
	for i, f := range s.Faults {
		v.fault(joinIndex("faults", i), f)
	}
	v.expect("expect", s.Expect)
}

// names checks that the names of a list's items are unique and returns
// the set of them.
func (v *validator) names(list string, n int, name func(int) string) nameSet {
	set := map[string]bool{}
	first := map[string]string{}
	broken := false
	for _, e := range v.decodeErrs {
		broken = broken || within(e.Field, list)
	}
	for i := range n {
		p := joinKey(joinIndex(list, i), "name")
		nm := name(i)
		if f, dup := first[nm]; dup {
			v.errorf(p, "duplicate name %q (also at line %d)", nm, v.lineOf(f))
			continue
		}
		first[nm] = p
		set[nm] = true
	}
	return nameSet{names: set, broken: broken}
}

// ref checks that name is one of a known set; what says what kind of name.
func (v *validator) ref(path, what, name string, known nameSet) bool {
	if known.names[name] {
		return true
	}
	if known.broken {
		return false
	}
	names := make([]string, 0, len(known.names))
	for k := range known.names {
		names = append(names, k)
	}
	slices.Sort(names)
	list := "none are defined"
	if len(names) > 0 {
		list = "known: " + strings.Join(names, ", ")
	}
	v.errorf(path, "unknown %s %q (%s)%s", what, name, list, suggest(name, names))
	return false
}

// before checks that a virtual time falls before the limit.
func (v *validator) before(path string, d time.Duration) {
	if d >= v.s.Limit && v.s.Limit > 0 {
		v.errorf(path, "%s is not before limit %s", d, v.s.Limit)
	}
}

func (v *validator) positive(path string, d time.Duration) {
	if d <= 0 {
		v.errorf(path, "invalid value %s: must be more than 0s", d)
	}
}

func (v *validator) image(p string, im Image) {
	if dig := imageref.Digest(im.Ref); dig != "" && im.Digest != "" && im.Digest != dig {
		v.errorf(joinKey(p, "digest"), "digest %q differs from the digest of ref %q", im.Digest, im.Ref)
	}
	if im.Size.Sign() <= 0 {
		v.errorf(joinKey(p, "size"), "invalid value %s: must be more than 0", im.Size.String())
	}
	if v.has(joinKey(p, "bootFailure")) && !im.FailsToBoot {
		v.errorf(joinKey(p, "bootFailure"), "bootFailure %s is given but failsToBoot is false", im.BootFailure)
	}
}

func (v *validator) distribution(p string, d Distribution) {
	params := map[DistKind][]string{
		DistFixed:     {"value"},
		DistUniform:   {"min", "max"},
		DistNormal:    {"mean", "stddev", "min", "max"},
		DistLognormal: {"median", "sigma", "min", "max"},
	}
	required := map[DistKind][]string{
		DistFixed:     {"value"},
		DistUniform:   {"min", "max"},
		DistNormal:    {"mean", "stddev"},
		DistLognormal: {"median", "sigma"},
	}
	if !v.has(p) || !v.has(joinKey(p, "dist")) {
		return // defaulted, or the shorthand
	}
	for _, f := range fieldsOf(distributionType) {
		fp := joinKey(p, f.name)
		if f.name != "dist" && v.has(fp) && !slices.Contains(params[d.Dist], f.name) {
			v.errorf(fp, "%s is not a parameter of a %s distribution (want %s)", f.name, d.Dist, strings.Join(params[d.Dist], ", "))
		}
	}
	for _, name := range required[d.Dist] {
		if !v.has(joinKey(p, name)) {
			v.errorf(joinKey(p, name), "required for a %s distribution", d.Dist)
		}
	}
	if v.has(joinKey(p, "min")) && v.has(joinKey(p, "max")) && d.Min > d.Max {
		v.errorf(joinKey(p, "min"), "min %s is more than max %s", d.Min, d.Max)
	}
	switch d.Dist {
	case DistNormal:
		if (v.has(joinKey(p, "max")) && d.Mean > d.Max) || d.Mean < d.Min {
			v.errorf(joinKey(p, "mean"), "mean %s is outside [min, max]", d.Mean)
		}
	case DistLognormal:
		if v.has(joinKey(p, "median")) && d.Median <= 0 {
			v.errorf(joinKey(p, "median"), "invalid value %s: must be more than 0s", d.Median)
		}
	}
}

func (v *validator) nodeGroup(p string, g NodeGroup) {
	v.labels(joinKey(p, "labels"), g.Labels)
	v.resources(joinKey(p, "capacity"), g.Capacity)
	for _, r := range []string{"cpu", "memory"} {
		if _, ok := g.Capacity[r]; !ok && v.has(joinKey(p, "capacity")) {
			v.errorf(joinKey(p, "capacity"), "capacity.%s is required", r)
		}
	}
	v.taints(joinKey(p, "taints"), g.Taints)
	seen := map[string]bool{}
	for i, c := range g.Conditions {
		cp := joinKey(joinIndex(joinKey(p, "conditions"), i), "type")
		v.conditionType(cp, c.Type)
		if seen[c.Type] {
			v.errorf(cp, "condition %q is given twice", c.Type)
		}
		seen[c.Type] = true
	}
	v.ref(joinKey(p, "bootImage"), "image", g.BootImage, v.images)
	if g.Cordoned > g.Count {
		v.errorf(joinKey(p, "cordoned"), "invalid value %d: more than count %d", g.Cordoned, g.Count)
	}
	if g.ImageFsUsed.Cmp(g.ImageFsCapacity) > 0 {
		v.errorf(joinKey(p, "imageFsUsed"), "%s is more than imageFsCapacity %s", g.ImageFsUsed.String(), g.ImageFsCapacity.String())
	}
	if g.Karpenter != nil {
		kp := joinKey(joinKey(p, "karpenter"), "nodePool")
		if v.s.Karpenter == nil {
			v.errorf(kp, "node pool %q needs a karpenter section", g.Karpenter.NodePool)
		} else {
			v.ref(kp, "Karpenter node pool", g.Karpenter.NodePool, v.nodePools)
		}
	}
}

func (v *validator) labels(p string, m map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			v.errorf(joinKey(p, k), "invalid label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(m[k]); len(errs) > 0 {
			v.errorf(joinKey(p, k), "invalid label value %q: %s", m[k], strings.Join(errs, "; "))
		}
	}
}

func (v *validator) resources(p string, m map[string]resource.Quantity) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			v.errorf(joinKey(p, k), "invalid resource name %q: %s", k, strings.Join(errs, "; "))
		}
	}
}

func (v *validator) taints(p string, ts []Taint) {
	seen := map[string]bool{}
	for i, t := range ts {
		tp := joinIndex(p, i)
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			v.errorf(joinKey(tp, "key"), "invalid taint key %q: %s", t.Key, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
			v.errorf(joinKey(tp, "value"), "invalid taint value %q: %s", t.Value, strings.Join(errs, "; "))
		}
		id := t.Key + ":" + string(t.Effect)
		if seen[id] {
			v.errorf(tp, "duplicate taint %s", id)
		}
		seen[id] = true
	}
}

func (v *validator) pool(p string, pl Pool) {
	if len(pl.NodeSelector) == 0 {
		v.errorf(joinKey(p, "nodeSelector"), "must not be empty")
	}
	v.labels(joinKey(p, "nodeSelector"), pl.NodeSelector)
	v.ref(joinKey(p, "image"), "image", pl.Image, v.images)
	if pl.DrainTimeout != nil {
		v.positive(joinKey(p, "drainTimeout"), pl.DrainTimeout.Duration)
	}
	if pl.HealthTimeout != nil {
		v.positive(joinKey(p, "healthTimeout"), pl.HealthTimeout.Duration)
	}
	v.windows(joinKey(p, "windows"), pl.Windows)
	if d := pl.Karpenter.PostUpdateProtection; d != nil && d.Duration < 0 {
		v.errorf(joinKey(joinKey(p, "karpenter"), "postUpdateProtection"), "invalid value %s: must be 0s (off) or more", d.Duration)
	}
}

// windows checks a pool's maintenance windows.
func (v *validator) windows(p string, ws []v1alpha1.MaintenanceWindow) {
	for i, w := range ws {
		wp := joinIndex(p, i)
		if d := w.Duration.Duration; d <= 0 || d > 24*time.Hour {
			v.errorf(joinKey(wp, "duration"), "invalid value %s: must be more than 0s and at most 24h", d)
		}
		seen := map[v1alpha1.Weekday]bool{}
		for j, day := range w.Days {
			if seen[day] {
				v.errorf(joinIndex(joinKey(wp, "days"), j), "duplicate day %s", day)
			}
			seen[day] = true
		}
	}
}

func (v *validator) karpenter(p string, k *Karpenter) {
	if k.InstallCRDsAt != nil {
		v.before(joinKey(p, "installCRDsAt"), *k.InstallCRDsAt)
	}
	v.positive(joinKey(p, "repairToleration"), k.RepairToleration)
	for i, nc := range k.NodeClasses {
		v.ref(joinKey(joinIndex(joinKey(p, "nodeClasses"), i), "bootImage"), "image", nc.BootImage, v.images)
	}
	for i, np := range k.NodePools {
		pp := joinIndex(joinKey(p, "nodePools"), i)
		switch {
		case np.NodeClass != "":
			v.ref(joinKey(pp, "nodeClass"), "node class", np.NodeClass, v.nodeClasses)
		case len(k.NodeClasses) != 1:
			v.errorf(joinKey(pp, "nodeClass"), "required when there is not exactly one node class (there are %d)", len(k.NodeClasses))
		}
		v.labels(joinKey(pp, "labels"), np.Labels)
		v.resources(joinKey(pp, "capacity"), np.Capacity)
		v.taints(joinKey(pp, "startupTaints"), np.StartupTaints)
		for j, b := range np.Budgets {
			bp := joinIndex(joinKey(pp, "budgets"), j)
			if (b.Schedule == "") != (b.Duration == nil) {
				v.errorf(bp, "schedule and duration go together")
			}
			if b.Schedule != "" && !validCron(b.Schedule) {
				v.errorf(joinKey(bp, "schedule"), "invalid value %q: want a cron schedule of 5 fields or @hourly, @daily, @weekly, @monthly, @yearly", b.Schedule)
			}
			if b.Duration != nil {
				v.positive(joinKey(bp, "duration"), *b.Duration)
			}
			seen := map[DisruptionReason]bool{}
			for r, reason := range b.Reasons {
				rp := joinIndex(joinKey(bp, "reasons"), r)
				if seen[reason] {
					v.errorf(rp, "duplicate reason %s", reason)
				}
				seen[reason] = true
				if reason == "Unhealthy" && k.Version == "v1.14" {
					v.errorf(rp, "reason Unhealthy needs Karpenter v1.15 (version is %s)", k.Version)
				}
			}
		}
	}
}

var cronMacros = []string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}

func validCron(s string) bool {
	if slices.Contains(cronMacros, s) {
		return true
	}
	fields := strings.Fields(s)
	if len(fields) != 5 {
		return false
	}
	for _, f := range fields {
		if strings.Trim(strings.ToLower(f), "0123456789abcdefghijklmnopqrstuvwxyz*/,-?") != "" {
			return false
		}
	}
	return true
}

func (v *validator) pinnedImageSet(p string, ps PinnedImageSet) {
	if ps.Pool != "" {
		v.ref(joinKey(p, "pool"), "pool", ps.Pool, v.pools)
	}
	if v.has(joinKey(p, "nodeSelector")) && len(ps.NodeSelector) == 0 {
		v.errorf(joinKey(p, "nodeSelector"), "must not be empty")
	}
	v.labels(joinKey(p, "nodeSelector"), ps.NodeSelector)
	if ps.At != nil {
		v.before(joinKey(p, "at"), *ps.At)
	}
	v.pinnedImages(joinKey(p, "images"), ps.Images)
}

// pinnedImages checks the images of a PinnedImageSet.
func (v *validator) pinnedImages(p string, images []PinnedImage) {
	seen := map[string]bool{}
	for i, im := range images {
		ip := joinIndex(p, i)
		if seen[im.Ref] {
			v.errorf(joinKey(ip, "ref"), "duplicate image %q", im.Ref)
		}
		seen[im.Ref] = true
		if im.Size.Sign() <= 0 {
			v.errorf(joinKey(ip, "size"), "invalid value %s: must be more than 0", im.Size.String())
		}
		var layers int64
		for j, l := range im.Layers {
			if l.Size.Sign() <= 0 {
				v.errorf(joinKey(joinIndex(joinKey(ip, "layers"), j), "size"), "invalid value %s: must be more than 0", l.Size.String())
			}
			layers += l.Size.Value()
		}
		if layers > im.Size.Value() {
			v.errorf(joinKey(ip, "layers"), "the layers add up to more than size %s", im.Size.String())
		}
	}
}

func (v *validator) event(p string, e Event) {
	v.before(joinKey(p, "at"), e.At)
	switch {
	case e.SetPoolImage != nil:
		ap := joinKey(p, "setPoolImage")
		v.ref(joinKey(ap, "pool"), "pool", e.SetPoolImage.Pool, v.pools)
		v.ref(joinKey(ap, "image"), "image", e.SetPoolImage.Image, v.images)
	case e.Pause != nil:
		v.ref(joinKey(joinKey(p, "pause"), "pool"), "pool", e.Pause.Pool, v.pools)
	case e.ScaleWorkload != nil:
		v.ref(joinKey(joinKey(p, "scaleWorkload"), "workload"), "workload", e.ScaleWorkload.Workload, v.workloads)
	case e.AddNodes != nil:
		v.ref(joinKey(joinKey(p, "addNodes"), "group"), "node group", e.AddNodes.Group, v.groups)
	case e.RemoveNodes != nil:
		v.ref(joinKey(joinKey(p, "removeNodes"), "group"), "node group", e.RemoveNodes.Group, v.groups)
	case e.SetPinnedImages != nil:
		ap := joinKey(p, "setPinnedImages")
		v.ref(joinKey(ap, "set"), "PinnedImageSet", e.SetPinnedImages.Set, v.pinnedSets)
		v.pinnedImages(joinKey(ap, "images"), e.SetPinnedImages.Images)
	case e.SetNodePoolLabels != nil:
		ap := joinKey(p, "setNodePoolLabels")
		v.ref(joinKey(ap, "nodePool"), "Karpenter node pool", e.SetNodePoolLabels.NodePool, v.nodePools)
		if len(e.SetNodePoolLabels.Set) == 0 {
			v.errorf(joinKey(ap, "set"), "set at least one label")
		}
		v.labels(joinKey(ap, "set"), e.SetNodePoolLabels.Set)
	case e.SetNodeClassImage != nil:
		ap := joinKey(p, "setNodeClassImage")
		v.ref(joinKey(ap, "nodeClass"), "node class", e.SetNodeClassImage.NodeClass, v.nodeClasses)
		v.ref(joinKey(ap, "image"), "image", e.SetNodeClassImage.Image, v.images)
	default:
		v.action(p, e)
	}
}

// keyEdits checks the set and remove of a label or annotation edit at ap:
// something to change, valid keys to remove, none both set and removed.
func (v *validator) keyEdits(ap, what string, set map[string]string, remove []string) {
	if len(set) == 0 && len(remove) == 0 {
		v.errorf(ap, "nothing to change: give set or remove")
	}
	for i, k := range remove {
		rp := joinIndex(joinKey(ap, "remove"), i)
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			v.errorf(rp, "invalid %s key %q: %s", what, k, strings.Join(errs, "; "))
		}
		if _, ok := set[k]; ok {
			v.errorf(rp, "%s %q is both set and removed", what, k)
		}
	}
}

// action checks the human and Karpenter actions of an event.
func (v *validator) action(p string, e Event) {
	switch {
	case e.DeletePool != nil:
		v.ref(joinKey(joinKey(p, "deletePool"), "pool"), "pool", e.DeletePool.Pool, v.pools)
	case e.CreatePool != nil:
		v.pool(joinKey(p, "createPool"), *e.CreatePool)
	case e.SetPool != nil:
		v.setPool(joinKey(p, "setPool"), e.SetPool)
	case e.RelabelNode != nil:
		ap := joinKey(p, "relabelNode")
		e := e.RelabelNode
		v.node(joinKey(ap, "node"), e.Node)
		v.labels(joinKey(ap, "set"), e.Set)
		v.keyEdits(ap, "label", e.Set, e.Remove)
	case e.AnnotateNode != nil:
		ap := joinKey(p, "annotateNode")
		e := e.AnnotateNode
		v.node(joinKey(ap, "node"), e.Node)
		for _, k := range slices.Sorted(maps.Keys(e.Set)) {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				v.errorf(joinKey(joinKey(ap, "set"), k), "invalid annotation key %q: %s", k, strings.Join(errs, "; "))
			}
		}
		v.keyEdits(ap, "annotation", e.Set, e.Remove)
	case e.DeleteNode != nil:
		v.node(joinKey(joinKey(p, "deleteNode"), "node"), e.DeleteNode.Node)
	case e.DeleteBootcNode != nil:
		v.node(joinKey(joinKey(p, "deleteBootcNode"), "node"), e.DeleteBootcNode.Node)
	case e.CordonNode != nil:
		v.node(joinKey(joinKey(p, "cordonNode"), "node"), e.CordonNode.Node)
	case e.UncordonNode != nil:
		v.node(joinKey(joinKey(p, "uncordonNode"), "node"), e.UncordonNode.Node)
	case e.SetPDB != nil:
		v.ref(joinKey(joinKey(p, "setPDB"), "workload"), "workload", e.SetPDB.Workload, v.workloads)
	case e.DeletePDB != nil:
		v.ref(joinKey(joinKey(p, "deletePDB"), "workload"), "workload", e.DeletePDB.Workload, v.workloads)
	case e.KarpenterCRDs != nil:
		if v.s.Karpenter == nil {
			v.errorf(joinKey(joinKey(p, "karpenterCRDs"), "installed"), "Karpenter's CRDs need a karpenter section")
		}
	}
}

func (v *validator) setPool(p string, e *SetPool) {
	v.ref(joinKey(p, "pool"), "pool", e.Pool, v.pools)
	if e.Image != "" {
		v.ref(joinKey(p, "image"), "image", e.Image, v.images)
	}
	if v.has(joinKey(p, "nodeSelector")) && len(e.NodeSelector) == 0 {
		v.errorf(joinKey(p, "nodeSelector"), "must not be empty")
	}
	v.labels(joinKey(p, "nodeSelector"), e.NodeSelector)
	if e.DrainTimeout != nil {
		v.positive(joinKey(p, "drainTimeout"), e.DrainTimeout.Duration)
	}
	if e.HealthTimeout != nil {
		v.positive(joinKey(p, "healthTimeout"), e.HealthTimeout.Duration)
	}
	if e.Windows != nil {
		v.windows(joinKey(p, "windows"), *e.Windows)
	}
	if e.Image == "" && e.NodeSelector == nil && e.MaxUnavailable == nil && e.MaxStaging == nil && e.Paused == nil &&
		e.FailurePolicy == nil && e.Windows == nil && e.DrainTimeout == nil && e.HealthTimeout == nil {
		v.errorf(p, "nothing to change: give at least one field besides pool")
	}
}

// node checks a node name an action names: <group>-<i> of a node that
// exists at the start or that an event adds, or any index of a group (or
// NodePool) whose nodes Karpenter launches.
func (v *validator) node(p, name string) {
	if v.groups.broken {
		return
	}
	if v.nodeExists(name) {
		return
	}
	if k := v.s.Karpenter; k != nil {
		var prefixes []string
		for _, g := range v.s.NodeGroups {
			if g.Karpenter != nil {
				prefixes = append(prefixes, g.Name)
			}
		}
		for _, np := range k.NodePools {
			prefixes = append(prefixes, np.Name)
		}
		for _, pre := range prefixes {
			rest, ok := strings.CutPrefix(name, pre+"-")
			if i, err := strconv.Atoi(rest); ok && err == nil && strconv.Itoa(i) == rest && i >= 0 {
				return
			}
		}
	}
	v.errorf(p, "unknown node %q: node names are <group>-<i> for a group's nodes, counting nodes added by events (any i for nodes Karpenter launches)", name)
}

func (v *validator) fault(p string, f Fault) {
	if f.At != nil {
		v.before(joinKey(p, "at"), *f.At)
	}
	if w := f.Window; w != nil {
		wp := joinKey(p, "window")
		if w.From >= w.To {
			v.errorf(joinKey(wp, "to"), "to %s is not after from %s", w.To, w.From)
		}
		v.before(joinKey(wp, "from"), w.From)
		if w.To > v.s.Limit {
			v.errorf(joinKey(wp, "to"), "%s is beyond limit %s", w.To, v.s.Limit)
		}
	}
	switch {
	case f.DaemonCrash != nil:
		v.target(joinKey(p, "daemonCrash"), f.DaemonCrash.Target)
	case f.NodeCrash != nil:
		v.target(joinKey(p, "nodeCrash"), f.NodeCrash.Target)
	case f.PowerCycle != nil:
		v.target(joinKey(p, "powerCycle"), f.PowerCycle.Target)
		v.positive(joinKey(joinKey(p, "powerCycle"), "offFor"), f.PowerCycle.OffFor)
	case f.ClockSkew != nil:
		fp := joinKey(p, "clockSkew")
		v.target(fp, f.ClockSkew.Target)
		if o := time.Duration(f.ClockSkew.Offset); o == 0 || o > MaxClockSkew || o < -MaxClockSkew {
			v.errorf(joinKey(fp, "offset"), "invalid value %s: want a duration other than 0s, at most %s ahead or behind, e.g. -3s", o, MaxClockSkew)
		}
		if f.ClockSkew.For != nil {
			v.positive(joinKey(fp, "for"), *f.ClockSkew.For)
		}
	case f.LongReboot != nil:
		v.target(joinKey(p, "longReboot"), f.LongReboot.Target)
		v.positive(joinKey(joinKey(p, "longReboot"), "duration"), f.LongReboot.Duration)
	case f.BootFailure != nil:
		v.target(joinKey(p, "bootFailure"), f.BootFailure.Target)
	case f.RegistryOutage != nil:
		v.positive(joinKey(joinKey(p, "registryOutage"), "for"), f.RegistryOutage.For)
	case f.SlowPulls != nil:
		v.positive(joinKey(joinKey(p, "slowPulls"), "for"), f.SlowPulls.For)
	case f.DiskFill != nil:
		fp := joinKey(p, "diskFill")
		v.target(fp, f.DiskFill.Target)
		if f.DiskFill.Size.Sign() <= 0 {
			v.errorf(joinKey(fp, "size"), "invalid value %s: must be more than 0", f.DiskFill.Size.String())
		}
		if f.DiskFill.For != nil {
			v.positive(joinKey(fp, "for"), *f.DiskFill.For)
		}
	case f.NodeConditionAfterBoot != nil:
		fp := joinKey(p, "nodeConditionAfterBoot")
		v.target(fp, f.NodeConditionAfterBoot.Target)
		v.conditionType(joinKey(fp, "type"), f.NodeConditionAfterBoot.Type)
		if f.NodeConditionAfterBoot.For != nil {
			v.positive(joinKey(fp, "for"), *f.NodeConditionAfterBoot.For)
		}
	case f.DaemonSetNotReadyAfterBoot != nil:
		fp := joinKey(p, "daemonSetNotReadyAfterBoot")
		e := f.DaemonSetNotReadyAfterBoot
		v.target(fp, e.Target)
		if !slices.ContainsFunc(v.s.DaemonSets, func(d DaemonSet) bool { return d.Name == e.DaemonSet }) {
			v.errorf(joinKey(fp, "daemonSet"), "unknown DaemonSet %q: name one of daemonSets", e.DaemonSet)
		}
		if e.For != nil {
			v.positive(joinKey(fp, "for"), *e.For)
		}
	case f.ReadyFlapsAfterBoot != nil:
		fp := joinKey(p, "readyFlapsAfterBoot")
		v.target(fp, f.ReadyFlapsAfterBoot.Target)
		v.positive(joinKey(fp, "ready"), f.ReadyFlapsAfterBoot.Ready)
		v.positive(joinKey(fp, "notReady"), f.ReadyFlapsAfterBoot.NotReady)
	case f.APIErrors != nil:
		for i, verb := range f.APIErrors.Verbs {
			if !slices.Contains(apiVerbs, verb) {
				v.errorf(joinIndex(joinKey(joinKey(p, "apiErrors"), "verbs"), i), "invalid value %q: want one of %s", verb, strings.Join(apiVerbs, ", "))
			}
		}
		e := f.APIErrors
		if reads := len(e.Verbs) > 0 && !slices.ContainsFunc(e.Verbs, func(v string) bool { return v != "get" && v != "list" }); reads && len(e.CodesFor(false)) == 0 {
			v.errorf(joinKey(joinKey(p, "apiErrors"), "codes"), "codes %v fail only writes (no API server answers a read with 409), and verbs %v are reads: the fault would fail nothing; add a write verb or another code", e.Codes, e.Verbs)
		}
	}
}

// apiVerbs are the request verbs apiErrors.verbs may name.
var apiVerbs = []string{"get", "list", "create", "update", "patch", "delete", "deletecollection", "update/status", "patch/status", "create/eviction"}

// conditionType refuses Ready (the kubelet's own) and an empty type.
func (v *validator) conditionType(p, t string) {
	switch t {
	case "":
		v.errorf(p, "a condition type is required, e.g. NetworkUnavailable")
	case "Ready":
		v.errorf(p, "invalid value %q: Ready is the kubelet's; name another condition", t)
	}
}

func (v *validator) target(p string, t Target) {
	if t.Node != "" {
		if v.has(joinKey(p, "count")) {
			v.errorf(joinKey(p, "count"), "count goes with group, not with node")
		}
		if !v.nodeExists(t.Node) {
			v.errorf(joinKey(p, "node"), "unknown node %q: node names are <group>-<i> for a group's nodes, counting nodes added by events", t.Node)
		}
		return
	}
	if v.ref(joinKey(p, "group"), "node group", t.Group, v.groups) {
		for _, g := range v.s.NodeGroups {
			if g.Name == t.Group && t.Count > g.Count+v.added[g.Name] {
				v.errorf(joinKey(p, "count"), "invalid value %d: group %s has at most %d nodes", t.Count, g.Name, g.Count+v.added[g.Name])
			}
		}
	}
}

// nodeExists reports whether name is <group>-<i> for some node that exists
// at the start or may be added by an event.
func (v *validator) nodeExists(name string) bool {
	for _, g := range v.s.NodeGroups {
		rest, ok := strings.CutPrefix(name, g.Name+"-")
		if !ok {
			continue
		}
		i, err := strconv.Atoi(rest)
		if err == nil && strconv.Itoa(i) == rest && i >= 0 && i < g.Count+v.added[g.Name] {
			return true
		}
	}
	return false
}

func (v *validator) expect(p string, e Expect) {
	seen := map[Invariant]bool{}
	for i, inv := range e.Invariants {
		if seen[inv] {
			v.errorf(joinIndex(joinKey(p, "invariants"), i), "duplicate invariant %s", inv)
		}
		seen[inv] = true
	}
	if e.CompletesWithin != nil {
		cp := joinKey(p, "completesWithin")
		v.positive(cp, *e.CompletesWithin)
		if *e.CompletesWithin > v.s.Limit {
			v.errorf(cp, "%s is beyond limit %s", *e.CompletesWithin, v.s.Limit)
		}
	}
	for _, pool := range slices.Sorted(maps.Keys(e.FinalImages)) {
		fp := joinKey(joinKey(p, "finalImages"), pool)
		v.ref(fp, "pool", pool, v.pools)
		v.ref(fp, "image", e.FinalImages[pool], v.images)
	}
	for _, pool := range slices.Sorted(maps.Keys(e.FailedNodes)) {
		fp := joinKey(joinKey(p, "failedNodes"), pool)
		v.ref(fp, "pool", pool, v.pools)
		if r := e.FailedNodes[pool]; r.Max != nil && r.Min > *r.Max {
			v.errorf(fp, "min %d is more than max %d", r.Min, *r.Max)
		}
	}
	for _, pool := range slices.Sorted(maps.Keys(e.Halted)) {
		v.ref(joinKey(joinKey(p, "halted"), pool), "pool", pool, v.pools)
	}
	for _, set := range slices.Sorted(maps.Keys(e.PinnedSets)) {
		fp := joinKey(joinKey(p, "pinnedSets"), set)
		v.ref(fp, "PinnedImageSet", set, v.pinnedSets)
		for _, f := range []struct {
			key string
			r   CountRange
		}{{"failed", e.PinnedSets[set].Failed}, {"done", e.PinnedSets[set].Done}} {
			if f.r.Max != nil && f.r.Min > *f.r.Max {
				v.errorf(joinKey(fp, f.key), "min %d is more than max %d", f.r.Min, *f.r.Max)
			}
		}
	}
}

// derive fills the defaults that depend on other values; it runs after
// validation.
func derive(s *Scenario) {
	for i := range s.Images {
		im := &s.Images[i]
		if im.Digest != "" {
			continue
		}
		if dig := imageref.Digest(im.Ref); dig != "" {
			im.Digest = dig
		} else {
			sum := sha256.Sum256([]byte(im.Ref))
			im.Digest = "sha256:" + hex.EncodeToString(sum[:])
		}
	}
	for i := range s.NodeGroups {
		if _, ok := s.NodeGroups[i].Capacity["pods"]; !ok {
			s.NodeGroups[i].Capacity["pods"] = resource.MustParse("110")
		}
	}
	if k := s.Karpenter; k != nil {
		for i := range k.NodePools {
			if k.NodePools[i].NodeClass == "" {
				k.NodePools[i].NodeClass = k.NodeClasses[0].Name
			}
		}
	}
}

// Image returns the image with short name name, or nil.
func (s *Scenario) Image(name string) *Image {
	for i := range s.Images {
		if s.Images[i].Name == name {
			return &s.Images[i]
		}
	}
	return nil
}

// Pool returns the pool named name, or nil.
func (s *Scenario) Pool(name string) *Pool {
	for i := range s.Bootroll.Pools {
		if s.Bootroll.Pools[i].Name == name {
			return &s.Bootroll.Pools[i]
		}
	}
	return nil
}

// NodeGroup returns the node group named name, or nil.
func (s *Scenario) NodeGroup(name string) *NodeGroup {
	for i := range s.NodeGroups {
		if s.NodeGroups[i].Name == name {
			return &s.NodeGroups[i]
		}
	}
	return nil
}

// NodeName is the name of node i of a group.
func NodeName(group string, i int) string {
	return fmt.Sprintf("%s-%d", group, i)
}
