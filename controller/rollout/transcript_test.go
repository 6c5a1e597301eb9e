package rollout

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the expected decisions in testdata/*.txt")

// TestTranscripts replays each testdata/*.txt: lines that set up a pool
// and its nodes, and `pass` lines, each followed by `----` and the
// decisions the pass made, up to a blank line. A pass runs the rules as
// the pool reconciler does (Halt, Open, Direct, Slots, Report), with
// every write succeeding: the directed records get the target, granted
// records enter Draining (the node reconciler's take-up), and the pool
// keeps the status the pass wrote.
// With -update the decisions are rewritten from what the rules say now.
//
// Lines (images are single letters, A to Z; times are offsets from the
// start, like 90s):
//
//	pool key=value...   image, maxUnavailable, maxStaging, maxFailures,
//	                    healthTimeout, drainTimeout, paused, window
//	                    (HH:MM/duration)
//	node NAME key...    sets fields of a node (created on first use):
//	                    booted= staged= desired= target= failed= phase=
//	                    since= retryAfter= daemon= (Staging, Error),
//	                    ready, notready, unknown, cordoned, osnotready,
//	                    conflict=POOL, gone (no Node), norecord, record
//	                    (a new, empty one), deleting, created=,
//	                    rebooting (the daemon asked for a reboot and has
//	                    not reported since)
//	                    (node rules:) drainStarted=, slotGranted= (the
//	                    grant time of the slot it last took up), order=T (a boot
//	                    order for the desired image given at T),
//	                    withdrawn, rollback (of that order),
//	                    lastReboot=LETTER/BOOTID, bootid= (the daemon's),
//	                    nodeboot= (the Node's), left (no longer selected),
//	                    reason= (status.rollout.reason), claim (the
//	                    Node has a NodeClaim)
//	slot NAME t=OFFSET  the pool's table lists a slot for NAME and the
//	                    pool's target, granted at that time (the record
//	                    is not touched: the node rules take it up)
//	pass t=OFFSET       one pool pass at that time
//	step NAME t=OFFSET [remaining=N] [blocked]
//	                    the node rules for NAME at that time: its next
//	                    action, and for a drain (with N pods left after the
//	                    pass, and evictions refused) or a verification, what
//	                    it comes to; nothing is written
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out, err := replay(string(data))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if *update {
				if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if out != string(data) {
				t.Errorf("%s: the rules decide differently now (go test ./controller/rollout -run TestTranscripts -update rewrites it; review the diff; -want +got):\n%s", f, cmp.Diff(string(data), out))
			}
		})
	}
}

// world is what a transcript has set up so far.
type world struct {
	t0    time.Time
	pool  *v1alpha1.BootcNodePool
	nodes map[string]*tnode
	order []string
	// first is true until the first pass (a freshly started controller).
	first bool
}

type tnode struct {
	bn       *v1alpha1.BootcNode // nil: no record
	node     *corev1.Node        // nil: no member Node
	conflict string
}

func img(letter string) string {
	if letter == "" {
		return ""
	}
	return "registry.example/os@sha256:" + strings.Repeat(strings.ToLower(letter), 64)
}

func dig(letter string) string {
	if letter == "" {
		return ""
	}
	return "sha256:" + strings.Repeat(strings.ToLower(letter), 64)
}

// letterOf names an image or digest by its letter, for the output.
func letterOf(s string) string {
	if i := strings.LastIndex(s, ":"); i >= 0 && len(s) > i+1 {
		return strings.ToUpper(s[i+1 : i+2])
	}
	return s
}

func replay(script string) (string, error) {
	w := &world{t0: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), nodes: map[string]*tnode{}, first: true}
	w.pool = &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}}
	w.pool.Spec.NodeSelector = map[string]string{"pool": "p"}
	var out strings.Builder
	lines := strings.Split(script, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		out.WriteString(line + "\n")
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		var err error
		switch fields[0] {
		case "pool":
			err = w.setPool(fields[1:])
		case "node":
			if len(fields) < 2 {
				err = errors.New("node needs a name")
				break
			}
			err = w.setNode(fields[1], fields[2:])
		case "slot":
			err = w.slot(fields[1:])
		case "pass", "step":
			var got string
			if fields[0] == "pass" {
				got, err = w.pass(fields[1:])
			} else {
				got, err = w.step(fields[1:])
			}
			if err != nil {
				break
			}
			// Skip the recorded decisions: from "----" to a blank line.
			if i+1 < len(lines) && lines[i+1] == "----" {
				i++
				for i+1 < len(lines) && lines[i+1] != "" {
					i++
				}
			}
			out.WriteString("----\n" + got)
			// The decisions end at a blank line: one is added when the
			// next command follows at once, or the next run would take
			// that command for recorded output.
			if i+1 < len(lines) && lines[i+1] != "" {
				out.WriteString("\n")
			}
		default:
			err = fmt.Errorf("unknown command %q", fields[0])
		}
		if err != nil {
			return "", fmt.Errorf("line %d: %q: %w", i+1, line, err)
		}
	}
	return out.String(), nil
}

func (w *world) at(s string) (time.Time, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, err
	}
	return w.t0.Add(d), nil
}

func (w *world) setPool(args []string) error {
	sp := &w.pool.Spec
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "image":
			sp.Image = v1alpha1.ImageReference(img(v))
			w.pool.Status.TargetImage = img(v)
			w.pool.Generation++
		case "maxUnavailable":
			x := intstr.Parse(v)
			sp.Rollout.MaxUnavailable = &x
		case "maxStaging":
			n, err := strconv.Atoi(v)
			if err != nil {
				return err
			}
			sp.Rollout.MaxStaging = ptr.To(int32(n))
		case "maxFailures":
			n, err := strconv.Atoi(v)
			if err != nil {
				return err
			}
			sp.FailurePolicy.MaxFailures = ptr.To(int32(n))
		case "healthTimeout", "drainTimeout":
			d, err := time.ParseDuration(v)
			if err != nil {
				return err
			}
			if k == "healthTimeout" {
				sp.HealthTimeout = &metav1.Duration{Duration: d}
			} else {
				sp.DrainTimeout = &metav1.Duration{Duration: d}
			}
		case "paused":
			sp.Paused = v == "true"
		case "window":
			start, dur, _ := strings.Cut(v, "/")
			d, err := time.ParseDuration(dur)
			if err != nil {
				return err
			}
			sp.Windows = append(sp.Windows, v1alpha1.MaintenanceWindow{Start: start, Duration: metav1.Duration{Duration: d}})
		default:
			return fmt.Errorf("unknown pool field %q", k)
		}
	}
	return nil
}

func (w *world) setNode(name string, args []string) error {
	n := w.nodes[name]
	if n == nil {
		n = &tnode{
			bn:   &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(w.t0.Add(-time.Hour))}},
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "p"}}},
		}
		setReady(n.node, corev1.ConditionTrue)
		w.nodes[name] = n
		w.order = append(w.order, name)
		slices.Sort(w.order)
	}
	var order *v1alpha1.BootOrder
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		if k == "norecord" {
			n.bn = nil
			continue
		}
		if k == "record" {
			n.bn = &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(w.t0)}}
			continue
		}
		if k == "gone" {
			n.node = nil
			continue
		}
		bn, st := n.bn, (*v1alpha1.BootcNodeStatus)(nil)
		if bn != nil {
			st = &bn.Status
		}
		needRecord := func() error {
			if bn == nil {
				return fmt.Errorf("%s: node %s has no record", k, name)
			}
			return nil
		}
		needNode := func() error {
			if n.node == nil {
				return fmt.Errorf("%s: node %s has no Node", k, name)
			}
			return nil
		}
		var err error
		switch k {
		case "booted", "staged", "desired", "target", "failed", "phase", "since", "retryAfter", "daemon", "cordoned", "deleting", "created", "rebooting",
			"drainStarted", "slotGranted", "order", "withdrawn", "rollback", "lastReboot", "bootid", "reason":
			err = needRecord()
		case "ready", "notready", "unknown", "osnotready", "nodeboot", "left", "claim":
			err = needNode()
		}
		if err != nil {
			return err
		}
		switch k {
		case "booted":
			st.Booted = &v1alpha1.HostImage{Image: img(v), Digest: dig(v)}
		case "staged":
			st.Staged = nil
			if v != "" {
				st.Staged = &v1alpha1.HostImage{Image: img(v), Digest: dig(v)}
			}
		case "desired":
			bn.Spec.DesiredImage = img(v)
		case "target":
			st.Rollout.TargetImage = img(v)
		case "failed":
			st.Rollout.FailedImage = img(v)
		case "phase":
			st.Phase = v1alpha1.NodePhase(v)
		case "since":
			at, err := w.at(v)
			if err != nil {
				return err
			}
			st.Rollout.PhaseSince = &metav1.Time{Time: at}
		case "retryAfter":
			at, err := w.at(v)
			if err != nil {
				return err
			}
			st.Rollout.RetryAfter = &metav1.Time{Time: at}
		case "daemon":
			st.Daemon.Phase = v1alpha1.DaemonPhase(v)
			if v == string(v1alpha1.DaemonError) {
				st.Daemon.StageAttempts = 1
			}
		case "rebooting":
			// The daemon asked for a reboot and has not reported since.
			st.Daemon.BootID = "boot-1"
			st.Daemon.LastReboot = &v1alpha1.RebootRecord{Image: bn.Spec.DesiredImage, BootID: "boot-1"}
		case "cordoned":
			st.Rollout.Cordoned = v != "false"
		case "deleting":
			bn.DeletionTimestamp = &metav1.Time{Time: w.t0}
		case "created":
			at, err := w.at(v)
			if err != nil {
				return err
			}
			bn.CreationTimestamp = metav1.NewTime(at)
		case "ready":
			setReady(n.node, corev1.ConditionTrue)
		case "notready":
			setReady(n.node, corev1.ConditionFalse)
		case "unknown":
			setReady(n.node, corev1.ConditionUnknown)
		case "osnotready":
			n.node.Spec.Taints = []corev1.Taint{{Key: v1alpha1.TaintOSNotReady, Effect: corev1.TaintEffectNoSchedule}}
		case "conflict":
			n.conflict = v
		case "drainStarted", "slotGranted":
			at, err := w.at(v)
			if err != nil {
				return err
			}
			if k == "drainStarted" {
				st.Rollout.DrainStartedAt = &metav1.Time{Time: at}
			} else {
				st.Rollout.SlotGrantedAt = &metav1.Time{Time: at}
			}
		case "order":
			// A boot order for the desired image (set at the end of the
			// line, once desired= is read), given at v.
			at, err := w.at(v)
			if err != nil {
				return err
			}
			order = &v1alpha1.BootOrder{At: metav1.NewTime(at)}
		case "withdrawn", "rollback":
			if order == nil {
				return fmt.Errorf("%s: node %s: give order=T first", k, name)
			}
			order.Withdrawn = order.Withdrawn || k == "withdrawn"
			order.Rollback = order.Rollback || k == "rollback"
		case "lastReboot":
			letter, boot, _ := strings.Cut(v, "/")
			st.Daemon.LastReboot = &v1alpha1.RebootRecord{Image: img(letter), BootID: boot, At: metav1.NewTime(w.t0)}
		case "bootid":
			st.Daemon.BootID = v
		case "reason":
			st.Rollout.Reason = v
		case "nodeboot":
			n.node.Status.NodeInfo.BootID = v
		case "left":
			n.node.Labels = map[string]string{"pool": "elsewhere"}
		case "claim":
			n.node.OwnerReferences = []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: name + "-claim"}}
		default:
			return fmt.Errorf("unknown node field %q", k)
		}
	}
	if order != nil && n.bn != nil {
		order.Image = n.bn.Spec.DesiredImage
		n.bn.Spec.BootOrder = order
	}
	return nil
}

// step runs the node rules for one node at the time args give.
func (w *world) step(args []string) (string, error) {
	if len(args) < 2 || !strings.HasPrefix(args[1], "t=") {
		return "", errors.New("step needs NAME t=OFFSET")
	}
	n := w.nodes[args[0]]
	if n == nil || n.bn == nil || n.node == nil {
		return "", fmt.Errorf("step %s: needs a node with a record and a Node", args[0])
	}
	now, err := w.at(strings.TrimPrefix(args[1], "t="))
	if err != nil {
		return "", err
	}
	remaining, blocked := 0, false
	for _, a := range args[2:] {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "remaining":
			if remaining, err = strconv.Atoi(v); err != nil {
				return "", err
			}
		case "blocked":
			blocked = true
		default:
			return "", fmt.Errorf("unknown step argument %q", k)
		}
	}
	v := NodeView{Record: n.bn, Node: n.node, Pool: w.pool, Now: now}
	d := NextNodeAction(v, TestOnly{})
	var b strings.Builder
	fmt.Fprintf(&b, "action: %s", d.Action)
	if d.KeepProtected {
		b.WriteString(" keepProtected")
	}
	if d.Wait > 0 {
		fmt.Fprintf(&b, " wait=%s", d.Wait)
	}
	b.WriteString("\n")
	switch d.Action {
	case NodeDrain:
		dd := Drain(v, remaining, blocked)
		outcome := [...]string{"wait", "done", "timedOut"}[dd.Outcome]
		fmt.Fprintf(&b, "drain: %s took=%s", outcome, dd.Took)
		if dd.Outcome == DrainTimedOut {
			fmt.Fprintf(&b, " failures=%d backoff=%s", dd.Failures, dd.Backoff)
		}
		if dd.MarkBlocked {
			b.WriteString(" markBlocked")
		}
		if dd.Wait != 0 {
			fmt.Fprintf(&b, " wait=%s", dd.Wait)
		}
		b.WriteString("\n")
		if dd.Outcome == DrainDone {
			// The shell goes on to verify in the same pass.
			writeVerify(&b, Verify(v, TestOnly{}))
		}
	case NodeVerify:
		writeVerify(&b, Verify(v, TestOnly{}))
	case NodeTakeSlot:
		claimed := slices.ContainsFunc(v.Node.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "NodeClaim" })
		fmt.Fprintf(&b, "takeUp: %s\n", TakeUp(w.pool, d.Slot, claimed, ""))
	case NodeRelease:
		ok, wait := BootOrderSettled(v)
		fmt.Fprintf(&b, "boot order settled: %v", ok)
		if wait > 0 {
			fmt.Fprintf(&b, " wait=%s", wait)
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

// slot lists a slot for a node in the pool's table.
func (w *world) slot(args []string) error {
	if len(args) != 2 || !strings.HasPrefix(args[1], "t=") {
		return errors.New("slot needs NAME t=OFFSET")
	}
	at, err := w.at(strings.TrimPrefix(args[1], "t="))
	if err != nil {
		return err
	}
	w.pool.Status.Slots = append(w.pool.Status.Slots, v1alpha1.Slot{Node: args[0], Image: w.pool.Status.TargetImage, Since: metav1.NewTime(at)})
	return nil
}

func writeVerify(b *strings.Builder, vd VerifyDecision) {
	outcome := [...]string{"wait", "orderBoot", "done", "bootFailed", "healthTimeout"}[vd.Outcome]
	fmt.Fprintf(b, "verify: %s took=%s", outcome, vd.Took)
	if vd.MarkVerifying {
		b.WriteString(" markVerifying")
	}
	if vd.Wait != 0 {
		fmt.Fprintf(b, " wait=%s", vd.Wait)
	}
	b.WriteString("\n")
}

func setReady(n *corev1.Node, s corev1.ConditionStatus) {
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s}}
}

// pass runs one pool pass at the time args give and describes what it
// decided; the world then holds what the pass wrote.
func (w *world) pass(args []string) (string, error) {
	if len(args) != 1 || !strings.HasPrefix(args[0], "t=") {
		return "", errors.New("pass needs t=OFFSET")
	}
	now, err := w.at(strings.TrimPrefix(args[0], "t="))
	if err != nil {
		return "", err
	}
	id := func(s string) string { return s }
	var rows []Row
	members := 0
	var conflicts []string
	for _, name := range w.order {
		n := w.nodes[name]
		row := Row{Name: name}
		if n.node != nil {
			row.SetNode(n.node)
			row.Conflict = n.conflict
			members++
			if n.conflict != "" {
				conflicts = append(conflicts, name+" (also selected by pool "+n.conflict+")")
			}
		}
		row.SetRecord(n.bn, id)
		if row.Record == nil && row.Node == nil {
			continue
		}
		rows = append(rows, row)
	}
	target := w.pool.Status.TargetImage
	p := &Pass{Pool: w.pool, Rows: rows, Members: members, Target: target, TargetDigest: dig(letterOf(target)), Now: now}
	if target == "" {
		p.TargetDigest = ""
	}
	var b strings.Builder
	halted, failed := p.Halt()
	open := p.Open()
	active := target != "" && !w.pool.Spec.Paused && !halted
	fmt.Fprintf(&b, "halted=%v open=%v active=%v\n", halted, open, active)
	if active {
		var names []string
		for _, row := range p.Direct() {
			names = append(names, row.Name)
			bn := row.Record.DeepCopy()
			bn.Spec.DesiredImage = target
			w.nodes[row.Name].bn = bn
			row.SetRecord(bn, id)
		}
		fmt.Fprintf(&b, "direct: %s\n", list(names))
	}
	held, maxU, free, next, err := p.Slots(halted, active, open, w.first)
	w.first = false
	if err != nil {
		fmt.Fprintf(&b, "slots: error %v\n", err)
		return b.String(), nil
	}
	var keep, granted, deferred []string
	for _, s := range held {
		keep = append(keep, s.Node)
	}
	for len(granted) < free {
		name, ok := next()
		if !ok {
			break
		}
		row := FindRow(rows, name)
		downOnFailed := row.Failed != "" && row.Booted == dig(letterOf(row.Failed))
		if why := NodeBlocker(row.Node, downOnFailed); why != "" {
			deferred = append(deferred, name+" ("+why+")")
			p.Defer(name, why)
			p.WakeIn(DrainPoll)
			continue
		}
		granted = append(granted, name)
		held = append(held, v1alpha1.Slot{Node: name, Image: target, Since: metav1.NewTime(now)})
	}
	w.pool.Status.Slots = held
	fmt.Fprintf(&b, "slots: max=%d kept=%s free=%d granted=%s", maxU, list(keep), free, list(granted))
	if len(deferred) > 0 {
		fmt.Fprintf(&b, " deferred=%s", list(deferred))
	}
	b.WriteString("\n")
	for _, name := range granted {
		bn := w.nodes[name].bn.DeepCopy()
		bn.Status.Phase = v1alpha1.PhaseDraining
		bn.Status.Rollout.PhaseSince = &metav1.Time{Time: now}
		bn.Status.Rollout.Cordoned = true
		w.nodes[name].bn = bn
	}
	p.Report(nil, conflicts, failed, halted, open)
	st := &w.pool.Status
	fmt.Fprintf(&b, "summary: %s\n", st.Summary)
	if st.Halt != nil {
		var who []string
		for _, f := range st.Halt.Failures {
			who = append(who, f.Node)
		}
		fmt.Fprintf(&b, "halt: image=%s since=%s failures=%s\n", letterOf(st.Halt.Image), st.Halt.Since.Sub(w.t0), list(who))
	}
	var conds []string
	for _, c := range st.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	fmt.Fprintf(&b, "conditions: %s\n", strings.Join(conds, " "))
	if p.Wake > 0 {
		fmt.Fprintf(&b, "wake: %s\n", p.Wake)
	}
	return b.String(), nil
}

func list(items []string) string {
	if len(items) == 0 {
		return "-"
	}
	return strings.Join(items, ",")
}
