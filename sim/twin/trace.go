package twin

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/options"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/engine"
	"github.com/bootroll/bootroll/sim/invariant"
)

// tracer writes the JSONL trace: one object a line with the keys t (the
// virtual time, RFC 3339 in UTC), kind, object ("Kind/name") and details,
// in that order; encoding/json sorts the keys of details. A nil tracer
// writes nothing and costs nothing.
type tracer struct {
	w   *bufio.Writer
	eng *engine.Engine
	err error
	buf []byte
}

func newTracer(w io.Writer, eng *engine.Engine) *tracer {
	if w == nil {
		return nil
	}
	return &tracer{w: bufio.NewWriterSize(w, 1<<16), eng: eng}
}

func (t *tracer) on() bool { return t != nil && t.err == nil }

// emit writes one trace line at the engine's current time.
func (t *tracer) emit(kind, object string, details map[string]any) {
	if !t.on() {
		return
	}
	b := append(t.buf[:0], `{"t":"`...)
	b = t.eng.Now().UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","kind":`...)
	b = appendJSON(b, kind)
	b = append(b, `,"object":`...)
	b = appendJSON(b, object)
	b = append(b, `,"details":`...)
	if details == nil {
		b = append(b, `{}`...)
	} else {
		d, err := json.Marshal(details)
		if err != nil {
			t.err = fmt.Errorf("trace %s %s: %w", kind, object, err)
			return
		}
		b = append(b, d...)
	}
	b = append(b, "}\n"...)
	t.buf = b
	if _, err := t.w.Write(b); err != nil {
		t.err = fmt.Errorf("writing the trace: %w", err)
	}
}

func appendJSON(b []byte, s string) []byte {
	d, _ := json.Marshal(s) // a string always marshals
	return append(b, d...)
}

func (t *tracer) flush() error {
	if t == nil {
		return nil
	}
	if t.err != nil {
		return t.err
	}
	if err := t.w.Flush(); err != nil {
		return fmt.Errorf("writing the trace: %w", err)
	}
	return nil
}

// objectName is "Kind/name" (or "Kind/namespace/name") for the trace.
func objectName(o runtime.Object) string {
	kind := ""
	switch o.(type) {
	case *v1alpha1.BootcNodePool:
		kind = "BootcNodePool"
	case *v1alpha1.BootcNode:
		kind = "BootcNode"
	case *corev1.Node:
		kind = "Node"
	case *corev1.Pod:
		kind = "Pod"
	default:
		kind = fmt.Sprintf("%T", o)
	}
	m, err := apimeta.Accessor(o)
	if err != nil {
		return kind
	}
	if ns := m.GetNamespace(); ns != "" {
		return kind + "/" + ns + "/" + m.GetName()
	}
	return kind + "/" + m.GetName()
}

// traceWrite traces the writes worth reading back: pools, BootcNode phase
// and spec changes, Node cordon, slot marker and readiness changes. Pod
// churn is left to the cluster model's own trace records.
func (t *tracer) traceWrite(ev apiserver.Event) {
	if !t.on() {
		return
	}
	APILines(ev, t.emit)
}

// Emit receives one trace line: its kind, object and details.
type Emit func(kind, object string, details map[string]any)

// APILines turns one API event into the trace's API-level lines (the
// dotted kinds: pool.*, bootcnode.*, node.*), as the twin's trace has
// them. The cluster target (sim/clusterrun) writes the same lines from its
// watches, so that sim/fidelity reads both traces the same way. A
// Modified event must carry Old.
func APILines(ev apiserver.Event, emit Emit) {
	t := apiLines{emit}
	switch o := ev.Object.(type) {
	case *v1alpha1.BootcNodePool:
		t.tracePool(ev, o)
	case *v1alpha1.BootcNode:
		t.traceBootcNode(ev, o)
	case *corev1.Node:
		t.traceNode(ev, o)
	}
}

type apiLines struct{ emit Emit }

func (t apiLines) tracePool(ev apiserver.Event, o *v1alpha1.BootcNodePool) {
	name := objectName(o)
	switch ev.Type {
	case apiserver.Added:
		t.emit("pool.created", name, map[string]any{"image": string(o.Spec.Image), "generation": o.Generation, "paused": o.Spec.Paused})
		return
	case apiserver.Deleted:
		t.emit("pool.deleted", name, nil)
		return
	}
	old := ev.Old.(*v1alpha1.BootcNodePool)
	if old.Generation != o.Generation {
		t.emit("pool.spec", name, map[string]any{"image": string(o.Spec.Image), "generation": o.Generation, "paused": o.Spec.Paused})
	}
	if poolStatusLine(old) != poolStatusLine(o) {
		d := map[string]any{"summary": o.Status.Summary, "target": o.Status.TargetImage, "slots": slotNodes(o), "observedGeneration": o.Status.ObservedGeneration}
		for _, c := range o.Status.Conditions {
			d[c.Type] = string(c.Status) + "/" + c.Reason
		}
		t.emit("pool.status", name, d)
	}
}

// poolStatusLine is what of a pool status the trace reports; writes that
// change nothing of it are not traced.
func poolStatusLine(o *v1alpha1.BootcNodePool) string {
	s := fmt.Sprint(o.Status.Summary, "|", o.Status.TargetImage, "|", o.Status.ObservedGeneration, "|", slotNodes(o))
	for _, c := range o.Status.Conditions {
		s += "|" + c.Type + "=" + string(c.Status) + "/" + c.Reason
	}
	return s
}

func slotNodes(o *v1alpha1.BootcNodePool) []string {
	out := make([]string, len(o.Status.Slots))
	for i, s := range o.Status.Slots {
		out[i] = s.Node
	}
	return out
}

func (t apiLines) traceBootcNode(ev apiserver.Event, o *v1alpha1.BootcNode) {
	name := objectName(o)
	switch ev.Type {
	case apiserver.Added:
		t.emit("bootcnode.created", name, map[string]any{"pool": o.Spec.Pool})
		return
	case apiserver.Deleted:
		t.emit("bootcnode.deleted", name, map[string]any{"pool": o.Spec.Pool, "phase": string(o.Status.Phase)})
		return
	}
	old := ev.Old.(*v1alpha1.BootcNode)
	if old.Spec.DesiredImage != o.Spec.DesiredImage || orderOf(old) != orderOf(o) {
		t.emit("bootcnode.spec", name, map[string]any{"desiredImage": o.Spec.DesiredImage, "bootOrder": orderOf(o)})
	}
	if old.Status.Phase != o.Status.Phase {
		t.emit("bootcnode.phase", name, map[string]any{"from": string(old.Status.Phase), "to": string(o.Status.Phase),
			"reason": o.Status.Rollout.Reason, "message": o.Status.Rollout.Message})
	}
	if old.Status.Daemon.Phase != o.Status.Daemon.Phase || old.Status.Daemon.LastError != o.Status.Daemon.LastError {
		t.emit("bootcnode.daemon", name, map[string]any{"phase": string(o.Status.Daemon.Phase), "lastError": o.Status.Daemon.LastError,
			"stageAttempts": o.Status.Daemon.StageAttempts})
	}
}

func (t apiLines) traceNode(ev apiserver.Event, o *corev1.Node) {
	name := objectName(o)
	slot, marked := o.Annotations[v1alpha1.AnnotationSlot]
	switch ev.Type {
	case apiserver.Added:
		t.emit("node.created", name, map[string]any{"unschedulable": o.Spec.Unschedulable, "ready": ready(o)})
		return
	case apiserver.Deleted:
		t.emit("node.deleted", name, nil)
		return
	}
	old := ev.Old.(*corev1.Node)
	oldSlot, oldMarked := old.Annotations[v1alpha1.AnnotationSlot]
	if old.Spec.Unschedulable != o.Spec.Unschedulable || oldMarked != marked || oldSlot != slot {
		d := map[string]any{"unschedulable": o.Spec.Unschedulable}
		if marked {
			d["slot"] = slot
		}
		t.emit("node.cordon", name, d)
	}
	if ready(old) != ready(o) {
		t.emit("node.ready", name, map[string]any{"ready": ready(o)})
	}
	if (old.DeletionTimestamp == nil) != (o.DeletionTimestamp == nil) {
		t.emit("node.deleting", name, nil)
	}
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (t *tracer) traceViolation(v invariant.Violation) {
	obj := ""
	if len(v.Objects) > 0 {
		obj = v.Objects[0]
	}
	t.emit("violation", obj, map[string]any{"invariant": v.Invariant, "message": v.Message, "objects": v.Objects})
}

// recorder is the controller's event recorder: events go to the trace and
// are counted by type.
type recorder struct {
	t      *tracer
	counts map[string]int // type/reason
}

var _ options.Recorder = (*recorder)(nil)

// Eventf implements options.Recorder.
func (r *recorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.counts[eventtype+"/"+reason]++
	if !r.t.on() {
		return
	}
	r.t.emit("event", objectName(object), map[string]any{"type": eventtype, "reason": reason, "message": fmt.Sprintf(messageFmt, args...)})
}

// orderOf describes a BootcNode's boot order for the trace: "" (none, or
// one for another image), "boot", "rollback", or either "withdrawn", with
// the time it was given.
func orderOf(o *v1alpha1.BootcNode) string {
	b := o.Spec.BootOrder
	if b == nil || b.Image != o.Spec.DesiredImage {
		return ""
	}
	s := "boot"
	if b.Rollback {
		s = "rollback"
	}
	if b.Withdrawn {
		s += " withdrawn"
	}
	return s + " at " + b.At.UTC().Format(time.RFC3339)
}
