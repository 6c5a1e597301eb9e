package nodedaemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/imageref"
	"github.com/bootroll/bootroll/nodedaemon/cri"
	"github.com/bootroll/bootroll/nodedaemon/prefetch"
	"k8s.io/apimachinery/pkg/api/meta"
)

const node = "node-1"

// fakeHost is a synchronous Host that behaves as the Host contract asks:
// Stage starts a stage that the test finishes, Apply reboots at once.
type fakeHost struct {
	t   *testing.T
	obs Observation
	// calls records the host-changing calls, "Stage <image>", "Apply <image>", ...
	calls []string
	// onApply runs inside Apply, before the simulated reboot.
	onApply func(image string)
	// rebootInto is the image the host comes up on after Apply; "" means the
	// applied image.
	rebootInto string
	// shuttingDown is the host's answer to ShuttingDown.
	shuttingDown bool
}

func (h *fakeHost) Observe(context.Context) (Observation, error) { return h.obs, nil }

func (h *fakeHost) ShuttingDown(context.Context) (bool, error) { return h.shuttingDown, nil }

func (h *fakeHost) Stage(_ context.Context, image string) error {
	h.calls = append(h.calls, "Stage "+image)
	if h.obs.Staging {
		h.t.Errorf("Stage %s while a stage runs", image)
	}
	h.obs.Staging, h.obs.LastStage = true, nil
	return nil
}

// finishStage ends the running stage; err "" stages the image.
func (h *fakeHost) finishStage(err string) {
	h.t.Helper()
	if !h.obs.Staging {
		h.t.Fatal("finishStage: no stage runs")
	}
	image := strings.TrimPrefix(h.calls[len(h.calls)-1], "Stage ")
	h.obs.Staging = false
	h.obs.LastStage = &StageResult{Image: image, Err: err}
	if err == "" {
		h.obs.Staged = hi(image)
	}
}

func (h *fakeHost) Apply(_ context.Context, image string) error {
	h.calls = append(h.calls, "Apply "+image)
	if h.onApply != nil {
		h.onApply(image)
	}
	into := h.rebootInto
	if into == "" {
		into = image
	}
	// The reboot: a new boot, on the applied image (or not), nothing staged,
	// and the in-memory stage state is gone.
	h.obs = Observation{Booted: hi(into), Rollback: h.obs.Booted, BootID: h.obs.BootID + "+"}
	return nil
}

func (h *fakeHost) Rollback(context.Context) error {
	h.calls = append(h.calls, "Rollback")
	h.obs.RollbackQueued = true
	return nil
}

func (h *fakeHost) Reboot(context.Context) error {
	h.calls = append(h.calls, "Reboot")
	return nil
}

// harness is a fake API server holding one BootcNode, with every write the
// daemon makes captured.
type harness struct {
	t *testing.T
	// client is what the daemon uses; raw is the same store without the checks.
	client  client.Client
	raw     client.WithWatch
	clock   *clocktesting.FakeClock
	mu      sync.Mutex
	patches []string
}

func newHarness(t *testing.T, spec v1alpha1.BootcNodeSpec) *harness {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	// The Node, cordoned by bootroll for a slot: reboots may go ahead.
	nd := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: node, Annotations: map[string]string{v1alpha1.AnnotationSlot: "p"}},
		Spec:       corev1.NodeSpec{Unschedulable: true},
	}
	bn := &v1alpha1.BootcNode{
		ObjectMeta: metav1.ObjectMeta{Name: node, UID: "uid-1", Generation: 1},
		Spec:       spec,
		// The controller's part, which the daemon must leave alone.
		Status: v1alpha1.BootcNodeStatus{
			Phase:   v1alpha1.PhasePending,
			Rollout: v1alpha1.RolloutStatus{TargetImage: spec.DesiredImage, Reason: "WaitingForStage"},
			Daemon:  v1alpha1.DaemonStatus{PinnedImages: []v1alpha1.PinnedSetProgress{{Name: "set", Generation: 2}}},
		},
	}
	h := &harness{t: t, clock: clocktesting.NewFakeClock(t0)}
	notMine := func(verb string) error {
		t.Errorf("the daemon must write only status, got a %s", verb)
		return fmt.Errorf("%s not allowed", verb)
	}
	h.raw = fake.NewClientBuilder().
		WithScheme(scheme).
		WithObjects(bn, nd).
		WithStatusSubresource(&v1alpha1.BootcNode{}).
		Build()
	h.client = interceptor.NewClient(h.raw, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			data, err := patch.Data(obj)
			if err != nil {
				return err
			}
			h.mu.Lock()
			h.patches = append(h.patches, string(data))
			h.mu.Unlock()
			if sub != "status" {
				t.Errorf("patch of subresource %q, want status", sub)
			}
			if patch.Type() != "application/merge-patch+json" {
				t.Errorf("patch type %q, want a JSON merge patch", patch.Type())
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
		SubResourceUpdate: func(context.Context, client.Client, string, client.Object, ...client.SubResourceUpdateOption) error {
			return notMine("status update")
		},
		Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			return notMine("patch")
		},
		Update: func(context.Context, client.WithWatch, client.Object, ...client.UpdateOption) error {
			return notMine("update")
		},
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			return notMine("create")
		},
		Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
			return notMine("delete")
		},
	})
	return h
}

func (h *harness) reconcile(d *Daemon) reconcile.Result {
	h.t.Helper()
	res, err := d.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: node}})
	if err != nil {
		h.t.Fatalf("Reconcile: %v", err)
	}
	return res
}

func (h *harness) get() *v1alpha1.BootcNode {
	h.t.Helper()
	var bn v1alpha1.BootcNode
	if err := h.client.Get(context.Background(), client.ObjectKey{Name: node}, &bn); err != nil {
		h.t.Fatal(err)
	}
	return &bn
}

// setSpec changes the spec as the controller would, bumping the
// generation (the fake client does not). It writes around the interceptor:
// this is the controller, not the daemon.
func (h *harness) setSpec(f func(*v1alpha1.BootcNodeSpec)) {
	h.t.Helper()
	bn := h.get()
	f(&bn.Spec)
	bn.Generation++
	if err := h.raw.Update(context.Background(), bn); err != nil {
		h.t.Fatal(err)
	}
}

// setCordon sets the Node's spec.unschedulable (an admin's kubectl
// cordon or uncordon; the slot marker stays).
func (h *harness) setCordon(on bool) {
	h.t.Helper()
	var nd corev1.Node
	if err := h.raw.Get(context.Background(), client.ObjectKey{Name: node}, &nd); err != nil {
		h.t.Fatal(err)
	}
	nd.Spec.Unschedulable = on
	if err := h.raw.Update(context.Background(), &nd); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) phase() v1alpha1.DaemonPhase { return h.get().Status.Daemon.Phase }

func (h *harness) patchCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.patches)
}

// checkPatches checks every status patch the daemon sent: only the
// daemon-owned fields, never spec, phase, rollout or pinned images.
func (h *harness) checkPatches() {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.patches) == 0 {
		h.t.Fatal("no status patch was sent")
	}
	allowed := []string{"booted", "daemon", "rollbackImage", "staged"}
	for _, p := range h.patches {
		var top map[string]map[string]json.RawMessage
		if err := json.Unmarshal([]byte(p), &top); err != nil {
			h.t.Fatalf("patch %s: %v", p, err)
		}
		if len(top) != 1 || top["status"] == nil {
			h.t.Errorf("patch %s: want only the key status", p)
		}
		var keys []string
		for k := range top["status"] {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, allowed) {
			h.t.Errorf("patch %s: status keys %v, want %v", p, keys, allowed)
		}
		var daemon map[string]json.RawMessage
		if err := json.Unmarshal(top["status"]["daemon"], &daemon); err != nil {
			h.t.Fatalf("patch %s: status.daemon: %v", p, err)
		}
		if _, ok := daemon["pinnedImages"]; ok {
			h.t.Errorf("patch %s: writes status.daemon.pinnedImages, which the prefetch manager owns", p)
		}
	}
}

// checkControllerFields checks that the controller's part of the status
// and the pinned image progress survived the daemon's writes.
func (h *harness) checkControllerFields() {
	h.t.Helper()
	bn := h.get()
	if bn.Status.Phase != v1alpha1.PhasePending || bn.Status.Rollout.Reason != "WaitingForStage" {
		h.t.Errorf("controller status changed: phase %q, rollout %+v", bn.Status.Phase, bn.Status.Rollout)
	}
	if len(bn.Status.Daemon.PinnedImages) != 1 {
		h.t.Errorf("pinned image progress lost: %+v", bn.Status.Daemon.PinnedImages)
	}
}

func TestDaemonFullPath(t *testing.T) {
	h := newHarness(t, v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA})
	host := &fakeHost{t: t, obs: onOld()}
	d := New(node, h.client, host, h.clock, logr.Discard())

	// Pending → Staging.
	if res := h.reconcile(d); res.RequeueAfter != StagePoll {
		t.Errorf("requeue while staging = %v, want %v", res.RequeueAfter, StagePoll)
	}
	if got, want := host.calls, []string{"Stage " + imgA}; !slices.Equal(got, want) {
		t.Fatalf("calls = %v, want %v", got, want)
	}
	if got := h.phase(); got != v1alpha1.DaemonStaging {
		t.Fatalf("phase = %q, want Staging", got)
	}
	// Nothing changed: no action, no write.
	n := h.patchCount()
	h.clock.Step(10 * time.Second)
	h.reconcile(d)
	if len(host.calls) != 1 || h.patchCount() != n {
		t.Errorf("a Reconcile with nothing new acted: calls %v, patches %d → %d", host.calls, n, h.patchCount())
	}

	// The stage fails: Error, counted once, retried after the backoff.
	host.finishStage("registry unreachable")
	h.clock.Step(10 * time.Second)
	if res := h.reconcile(d); res.RequeueAfter != 10*time.Second {
		t.Errorf("requeue in backoff = %v, want 10s", res.RequeueAfter)
	}
	h.reconcile(d)
	bn := h.get()
	if bn.Status.Daemon.Phase != v1alpha1.DaemonError || bn.Status.Daemon.StageAttempts != 1 ||
		bn.Status.Daemon.LastError != "stage "+imgA+": registry unreachable" {
		t.Fatalf("after a failed stage: %+v, want Error with 1 attempt", bn.Status.Daemon)
	}
	h.clock.Step(10 * time.Second)
	h.reconcile(d)
	if got, want := host.calls, []string{"Stage " + imgA, "Stage " + imgA}; !slices.Equal(got, want) {
		t.Fatalf("calls after the backoff = %v, want %v", got, want)
	}

	// Staging → Staged: the error and the count are cleared on the server.
	host.finishStage("")
	h.reconcile(d)
	bn = h.get()
	if bn.Status.Daemon.Phase != v1alpha1.DaemonStaged || bn.Status.Staged == nil || bn.Status.Staged.Digest != imageref.Digest(imgA) {
		t.Fatalf("after staging: daemon %+v staged %+v, want Staged with %s", bn.Status.Daemon, bn.Status.Staged, imgA)
	}
	if bn.Status.Daemon.LastError != "" || bn.Status.Daemon.StageAttempts != 0 {
		t.Errorf("after a successful stage: lastError %q attempts %d, want both cleared", bn.Status.Daemon.LastError, bn.Status.Daemon.StageAttempts)
	}

	// Staged → Booted: the reboot is recorded before Apply runs.
	h.setSpec(func(s *v1alpha1.BootcNodeSpec) { s.BootOrder = order(s.DesiredImage) })
	host.onApply = func(image string) {
		r := h.get().Status.Daemon.LastReboot
		if r == nil || r.Image != image || r.BootID != boot1 || r.Rollback {
			t.Errorf("at Apply the server's lastReboot is %+v, want {%s %s}", r, image, boot1)
		}
	}
	h.clock.Step(time.Minute)
	if res := h.reconcile(d); res.RequeueAfter != RebootRecheck {
		t.Errorf("requeue after Apply = %v, want %v", res.RequeueAfter, RebootRecheck)
	}

	// The host rebooted (the fake did at Apply) and the daemon restarted.
	d = New(node, h.client, host, h.clock, logr.Discard())
	h.clock.Step(time.Minute)
	h.reconcile(d)
	h.reconcile(d)
	if got, want := host.calls, []string{"Stage " + imgA, "Stage " + imgA, "Apply " + imgA}; !slices.Equal(got, want) {
		t.Fatalf("calls = %v, want %v (Apply once)", got, want)
	}
	bn = h.get()
	if bn.Status.Daemon.Phase != v1alpha1.DaemonIdle || bn.Status.Booted.Digest != imageref.Digest(imgA) || bn.Status.Staged != nil {
		t.Errorf("after the reboot: daemon %+v booted %+v staged %+v, want Idle on %s, nothing staged", bn.Status.Daemon, bn.Status.Booted, bn.Status.Staged, imgA)
	}
	if bn.Status.Daemon.BootID != boot1+"+" || bn.Status.Daemon.ObservedGeneration != 2 {
		t.Errorf("after the reboot: bootID %q observedGeneration %d, want %q and 2", bn.Status.Daemon.BootID, bn.Status.Daemon.ObservedGeneration, boot1+"+")
	}
	h.checkPatches()
	h.checkControllerFields()
}

func TestDaemonRestartMidStaging(t *testing.T) {
	tests := []struct {
		name      string
		after     Observation // the host as the restarted daemon finds it
		wantCalls []string
		wantPhase v1alpha1.DaemonPhase
	}{
		{
			name:      "the stage finished while the daemon was down",
			after:     stagedObs(),
			wantCalls: []string{"Stage " + imgA},
			wantPhase: v1alpha1.DaemonStaged,
		},
		{
			name:      "the stage died with the daemon",
			after:     onOld(),
			wantCalls: []string{"Stage " + imgA, "Stage " + imgA},
			wantPhase: v1alpha1.DaemonStaging,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA})
			host := &fakeHost{t: t, obs: onOld()}
			h.reconcile(New(node, h.client, host, h.clock, logr.Discard()))

			host.obs = tt.after
			h.clock.Step(time.Minute)
			h.reconcile(New(node, h.client, host, h.clock, logr.Discard()))
			if !slices.Equal(host.calls, tt.wantCalls) {
				t.Errorf("calls = %v, want %v", host.calls, tt.wantCalls)
			}
			bn := h.get()
			if bn.Status.Daemon.Phase != tt.wantPhase || bn.Status.Daemon.StageAttempts != 0 {
				t.Errorf("daemon status = %+v, want phase %s and no attempts counted", bn.Status.Daemon, tt.wantPhase)
			}
			if got, want := bn.Status.Staged, hostImage(tt.after.Staged); (got == nil) != (want == nil) || (got != nil && got.Digest != want.Digest) {
				t.Errorf("status.staged = %+v, want %+v", got, want)
			}
			h.checkPatches()
			h.checkControllerFields()
		})
	}
}

func stagedObs() Observation {
	return with(onOld(), func(o *Observation) { o.Staged = hi(imgA) })
}

func TestDaemonNoSecondRebootAfterFailedBoot(t *testing.T) {
	h := newHarness(t, v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA, BootOrder: order(imgA)})
	// The new image does not come up: the host falls back to the old one.
	host := &fakeHost{t: t, obs: stagedObs(), rebootInto: imgOld}
	h.reconcile(New(node, h.client, host, h.clock, logr.Discard()))

	for range 3 {
		h.clock.Step(5 * time.Minute)
		h.reconcile(New(node, h.client, host, h.clock, logr.Discard()))
	}
	if got, want := host.calls, []string{"Apply " + imgA}; !slices.Equal(got, want) {
		t.Errorf("calls = %v, want %v", got, want)
	}
	bn := h.get()
	if bn.Status.Daemon.Phase != v1alpha1.DaemonError || !strings.Contains(bn.Status.Daemon.LastError, "failed to boot") {
		t.Errorf("daemon status = %+v, want Error naming the failed boot", bn.Status.Daemon)
	}
	h.checkPatches()
}

func TestDaemonReappliesWhenRebootDidNotHappen(t *testing.T) {
	h := newHarness(t, v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA, BootOrder: order(imgA)})
	host := &noReboot{fakeHost{t: t, obs: stagedObs()}}
	h.reconcile(New(node, h.client, host, h.clock, logr.Discard()))
	n := h.patchCount()
	h.clock.Step(RebootRecheck)
	// A restarted daemon, same boot: the reboot was asked for and did not come.
	h.reconcile(New(node, h.client, host, h.clock, logr.Discard()))
	if got, want := host.calls, []string{"Apply " + imgA, "Apply " + imgA}; !slices.Equal(got, want) {
		t.Errorf("calls = %v, want %v", got, want)
	}
	if h.patchCount() != n {
		t.Errorf("the repeated Apply rewrote the status (%d → %d patches)", n, h.patchCount())
	}
}

// A boot order withdrawn after the daemon asked the host to reboot: the
// same process reports Rebooting (the host goes down anyway), so the
// controller keeps the node cordoned; a restarted process on the same boot
// did not ask, and reports Staged, so the controller can give the node back.
func TestDaemonWithdrawnOrderAfterApply(t *testing.T) {
	h := newHarness(t, v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA, BootOrder: order(imgA)})
	host := &noReboot{fakeHost{t: t, obs: stagedObs()}}
	d := New(node, h.client, host, h.clock, logr.Discard())
	h.reconcile(d)
	h.setSpec(func(s *v1alpha1.BootcNodeSpec) { s.BootOrder = nil })
	h.reconcile(d)
	if got := h.phase(); got != v1alpha1.DaemonRebooting {
		t.Errorf("same process after the withdrawal: phase %s, want Rebooting", got)
	}
	h.reconcile(New(node, h.client, host, h.clock, logr.Discard()))
	if got := h.phase(); got != v1alpha1.DaemonStaged {
		t.Errorf("restarted process after the withdrawal: phase %s, want Staged", got)
	}
	if got, want := host.calls, []string{"Apply " + imgA}; !slices.Equal(got, want) {
		t.Errorf("calls = %v, want %v", got, want)
	}
}

// noReboot is a host whose Apply returns without rebooting.
type noReboot struct{ fakeHost }

func (h *noReboot) Apply(_ context.Context, image string) error {
	h.calls = append(h.calls, "Apply "+image)
	return nil
}

// TestDaemonStopsAtFailedReport shows the loop stops at a failed action:
// no Apply without the reboot record on the server.
func TestDaemonStopsAtFailedReport(t *testing.T) {
	h := newHarness(t, v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA, BootOrder: order(imgA)})
	c := interceptor.NewClient(h.raw, interceptor.Funcs{
		SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
			return errors.New("etcd unavailable")
		},
	})
	host := &fakeHost{t: t, obs: stagedObs()}
	d := New(node, c, host, h.clock, logr.Discard())
	_, err := d.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: node}})
	if err == nil || !strings.Contains(err.Error(), "etcd unavailable") {
		t.Fatalf("Reconcile error = %v, want the patch error", err)
	}
	if len(host.calls) != 0 {
		t.Errorf("calls = %v: Apply ran although the reboot record was not written", host.calls)
	}
}

func TestDaemonIgnoresOthersAndMissing(t *testing.T) {
	h := newHarness(t, v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA})
	host := &fakeHost{t: t, obs: onOld()}
	d := New(node, h.client, host, h.clock, logr.Discard())
	res, err := d.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "node-2"}})
	if err != nil || res != (reconcile.Result{}) || len(host.calls) != 0 {
		t.Errorf("other node: result %+v err %v calls %v, want nothing", res, err, host.calls)
	}
	d = New("node-3", h.client, host, h.clock, logr.Discard())
	res, err = d.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "node-3"}})
	if err != nil || res != (reconcile.Result{}) || len(host.calls) != 0 {
		t.Errorf("missing BootcNode: result %+v err %v calls %v, want nothing", res, err, host.calls)
	}
}

func TestStatusPatch(t *testing.T) {
	s := v1alpha1.BootcNodeStatus{
		Booted: hi(imgOld),
		Daemon: v1alpha1.DaemonStatus{
			Phase:              v1alpha1.DaemonRebooting,
			BootID:             boot1,
			LastReboot:         &v1alpha1.RebootRecord{Image: imgA, BootID: boot1, At: *at(0)},
			ObservedGeneration: 3,
			PinnedImages:       []v1alpha1.PinnedSetProgress{{Name: "ignored"}},
		},
		Phase: v1alpha1.PhaseFailed,
	}
	got, err := StatusPatch(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"status":{` +
		`"booted":{"digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000","image":"` + imgOld + `","timestamp":null,"version":null},` +
		`"daemon":{"bootID":"` + boot1 + `","lastAttempt":null,"lastError":null,` +
		`"lastReboot":{"at":"2026-03-01T12:00:00Z","bootID":"` + boot1 + `","image":"` + imgA + `","orderAt":null,"rollback":null},` +
		`"observedGeneration":3,"phase":"Rebooting","stageAttempts":null},` +
		`"rollbackImage":null,"staged":null}}`
	if string(got) != want {
		t.Errorf("StatusPatch =\n%s\nwant\n%s", got, want)
	}
}

// blockingHost is a Host whose Stage blocks until released.
type blockingHost struct {
	fakeHost
	release  chan error
	observes int
}

func (h *blockingHost) Observe(ctx context.Context) (Observation, error) {
	h.observes++
	return h.fakeHost.Observe(ctx)
}

func (h *blockingHost) Stage(_ context.Context, image string) error {
	err := <-h.release
	if err == nil {
		h.obs.Staged = hi(image)
	}
	return err
}

func TestAsyncHost(t *testing.T) {
	inner := &blockingHost{fakeHost: fakeHost{t: t, obs: onOld()}, release: make(chan error)}
	done := make(chan struct{}, 1)
	a := &AsyncHost{Host: inner, OnDone: func() { done <- struct{}{} }}
	ctx := context.Background()

	if _, err := a.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Stage(ctx, imgA); err != nil {
		t.Fatalf("Stage: %v", err)
	}
	// Stage returned while the download runs.
	obs, err := a.Observe(ctx)
	if err != nil || !obs.Staging || obs.LastStage != nil || obs.BootID != boot1 {
		t.Errorf("while staging: %+v %v, want Staging with the earlier observation", obs, err)
	}
	if inner.observes != 1 {
		t.Errorf("the wrapped host was observed %d times, want 1: not while a stage holds the sysroot", inner.observes)
	}
	if err := a.Stage(ctx, imgB); err == nil {
		t.Error("a second Stage while one runs succeeded")
	}
	if err := a.Apply(ctx, imgA); !errors.Is(err, errStaging) {
		t.Errorf("Apply while staging = %v, want errStaging", err)
	}

	inner.release <- errors.New("no space left on device")
	<-done
	obs, _ = a.Observe(ctx)
	if obs.Staging || obs.LastStage == nil || *obs.LastStage != (StageResult{Image: imgA, Err: "no space left on device"}) {
		t.Errorf("after a failed stage: %+v, want LastStage with the error", obs)
	}

	// A new stage forgets the last result.
	if err := a.Stage(ctx, imgA); err != nil {
		t.Fatal(err)
	}
	if obs, _ := a.Observe(ctx); !obs.Staging || obs.LastStage != nil {
		t.Errorf("second stage running: %+v, want Staging and no LastStage", obs)
	}
	inner.release <- nil
	<-done
	obs, _ = a.Observe(ctx)
	if obs.Staging || obs.LastStage == nil || obs.LastStage.Err != "" || obs.Staged == nil || obs.Staged.Digest != imageref.Digest(imgA) {
		t.Errorf("after a good stage: %+v, want LastStage ok and %s staged", obs, imgA)
	}
}

// TestDaemonWaitsForCordonedNode: the daemon reads its own Node (not the
// host's say) before a reboot. Uncordoned, it reports why it waits and
// keeps the order; cordoned again, it reboots.
func TestDaemonWaitsForCordonedNode(t *testing.T) {
	h := newHarness(t, v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA, BootOrder: order(imgA)})
	setCordon := h.setCordon
	setCordon(false)
	host := &fakeHost{t: t, obs: stagedObs()} // the host's own Node facts say protected: ignored
	d := New(node, h.client, host, h.clock, logr.Discard())
	res := h.reconcile(d)
	if len(host.calls) != 0 {
		t.Errorf("calls on an uncordoned Node = %v, want none", host.calls)
	}
	if res.RequeueAfter != NodeRecheck {
		t.Errorf("requeue %v, want NodeRecheck %v", res.RequeueAfter, NodeRecheck)
	}
	bn := h.get()
	if d := bn.Status.Daemon; d.Phase != v1alpha1.DaemonStaged || !strings.Contains(d.LastError, "not cordoned") || d.LastReboot != nil {
		t.Errorf("daemon status = %+v, want Staged, a lastError saying the Node is not cordoned, no reboot record", d)
	}
	setCordon(true)
	h.clock.Step(NodeRecheck)
	h.reconcile(d)
	if got, want := host.calls, []string{"Apply " + imgA}; !slices.Equal(got, want) {
		t.Errorf("calls once cordoned = %v, want %v", got, want)
	}
	h.checkPatches()
}

// TestDaemonRecordedRebootNotAsked: a process recorded the reboot its
// order asked for and stopped before asking the host (the record is
// written first); the Node was uncordoned meanwhile. A new process in the
// same boot asks the host whether it is going down: if not, the reboot
// will not come and the record goes (kept, it said for good that the host
// was going down: explorer seed 115028 of cluster-pool-deleted-mid-rollout);
// if so, the host goes down whatever the Node says, and the record stays.
func TestDaemonRecordedRebootNotAsked(t *testing.T) {
	for _, down := range []bool{false, true} {
		t.Run(fmt.Sprintf("shuttingDown=%v", down), func(t *testing.T) {
			h := newHarness(t, v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA, BootOrder: order(imgA)})
			// The first process: it records the reboot, and its Apply is
			// lost (it stopped before the call reached the host).
			host := &noReboot{fakeHost{t: t, obs: stagedObs()}}
			h.reconcile(New(node, h.client, host, h.clock, logr.Discard()))
			if r := h.get().Status.Daemon.LastReboot; r == nil || r.BootID != boot1 {
				t.Fatalf("first process: lastReboot %+v, want one on %s", r, boot1)
			}
			h.setCordon(false)
			host.calls, host.shuttingDown = nil, down
			h.clock.Step(time.Minute)
			h.reconcile(New(node, h.client, host, h.clock, logr.Discard()))
			d := h.get().Status.Daemon
			if len(host.calls) != 0 {
				t.Errorf("calls on an uncordoned Node = %v, want none", host.calls)
			}
			switch {
			case !down && (d.Phase != v1alpha1.DaemonStaged || d.LastReboot != nil || !strings.Contains(d.LastError, "not cordoned")):
				t.Errorf("host not going down: daemon status %+v, want Staged, waiting for the cordon, no reboot record", d)
			case down && (d.Phase != v1alpha1.DaemonRebooting || d.LastReboot == nil):
				t.Errorf("host going down: daemon status %+v, want Rebooting with the record kept", d)
			}
		})
	}
}

// recordingPrefetcher records each Sync's StagingDue and the host calls
// made before it.
type recordingPrefetcher struct {
	host *fakeHost
	seen []string
}

func (p *recordingPrefetcher) Sync(_ context.Context, _ time.Time, _ []v1alpha1.NodePinnedImageSet, current []v1alpha1.PinnedSetProgress, env prefetch.Env) ([]v1alpha1.PinnedSetProgress, time.Duration, error) {
	p.seen = append(p.seen, fmt.Sprintf("due=%v after %d host call(s)", env.StagingDue, len(p.host.calls)))
	return current, 0, nil
}

// TestDaemonPrefetchBeforeStage: a reconcile that stages first lets the
// prefetch give the staging reserve back (StagingDue), then stages, then
// runs its ordinary pass; a reconcile that does not stage runs only the
// ordinary pass.
func TestDaemonPrefetchBeforeStage(t *testing.T) {
	h := newHarness(t, v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA})
	host := &fakeHost{t: t, obs: onOld()}
	d := New(node, h.client, host, h.clock, logr.Discard())
	pf := &recordingPrefetcher{host: host}
	d.Prefetch = pf
	h.reconcile(d)
	if want := []string{"due=true after 0 host call(s)", "due=false after 1 host call(s)"}; !slices.Equal(pf.seen, want) {
		t.Errorf("prefetch passes %v, want %v", pf.seen, want)
	}
	pf.seen = nil
	h.clock.Step(10 * time.Second)
	h.reconcile(d)
	if want := []string{"due=false after 1 host call(s)"}; !slices.Equal(pf.seen, want) {
		t.Errorf("prefetch passes while staging %v, want %v", pf.seen, want)
	}
}

// A record being deleted gets no host action, but the daemon still
// acknowledges it: a process that asked the host to reboot says Rebooting,
// one that did not (restarted on the same boot) says Staged, so the
// controller can give the node back without waiting out healthTimeout.
func TestDaemonAcknowledgesARecordBeingDeleted(t *testing.T) {
	h := newHarness(t, v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA, BootOrder: order(imgA)})
	host := &noReboot{fakeHost{t: t, obs: stagedObs()}}
	d := New(node, h.client, host, h.clock, logr.Discard())
	h.reconcile(d)
	bn := h.get()
	bn.Finalizers = []string{v1alpha1.Finalizer}
	if err := h.raw.Update(context.Background(), bn); err != nil {
		t.Fatal(err)
	}
	if err := h.raw.Delete(context.Background(), h.get()); err != nil {
		t.Fatal(err)
	}
	h.reconcile(d)
	if got := h.phase(); got != v1alpha1.DaemonRebooting {
		t.Errorf("the process that asked for the reboot: phase %s, want Rebooting", got)
	}
	h.reconcile(New(node, h.client, host, h.clock, logr.Discard()))
	if got := h.phase(); got != v1alpha1.DaemonStaged {
		t.Errorf("a restarted process: phase %s, want Staged", got)
	}
	if got, want := host.calls, []string{"Apply " + imgA}; !slices.Equal(got, want) {
		t.Errorf("calls = %v, want %v (nothing on the host for a record being deleted)", got, want)
	}
}

// downRuntime is a Prefetcher whose runtime does not answer while down.
type downRuntime struct {
	down  bool
	calls int
}

func (p *downRuntime) Sync(_ context.Context, _ time.Time, _ []v1alpha1.NodePinnedImageSet, current []v1alpha1.PinnedSetProgress, _ prefetch.Env) ([]v1alpha1.PinnedSetProgress, time.Duration, error) {
	p.calls++
	if p.down {
		return nil, 0, fmt.Errorf("prefetch: image filesystem: %w", &cri.NoRuntimeError{Skipped: []cri.Skipped{{Socket: "/host/run/containerd/containerd.sock", Reason: "no such file"}}})
	}
	return current, 0, nil
}

// TestDaemonRuntimeUnavailable: with no container runtime answering, the
// daemon still stages its OS image, reports PrefetchAvailable False with
// the reason and what was tried, and looks again after a growing backoff;
// when the runtime answers again the condition turns True.
func TestDaemonRuntimeUnavailable(t *testing.T) {
	h := newHarness(t, v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA})
	host := &fakeHost{t: t, obs: onOld()}
	d := New(node, h.client, host, h.clock, logr.Discard())
	pf := &downRuntime{down: true}
	d.Prefetch = pf
	res := h.reconcile(d)
	if got, want := host.calls, []string{"Stage " + imgA}; !slices.Equal(got, want) {
		t.Errorf("host calls with the runtime down = %v, want %v: OS staging must not wait for the runtime", got, want)
	}
	cond := meta.FindStatusCondition(h.get().Status.Daemon.Conditions, prefetch.ConditionAvailable)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "RuntimeUnavailable" ||
		!strings.Contains(cond.Message, "/host/run/containerd/containerd.sock: no such file") {
		t.Fatalf("condition %+v, want PrefetchAvailable False, RuntimeUnavailable, naming the socket tried", cond)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > RuntimeRetryMax {
		t.Errorf("requeue %v, want a retry within %v", res.RequeueAfter, RuntimeRetryMax)
	}
	first := res.RequeueAfter
	h.clock.Step(first)
	if res = h.reconcile(d); res.RequeueAfter <= first {
		t.Errorf("second retry after %v, want more than the first %v (backoff)", res.RequeueAfter, first)
	}
	n := h.patchCount()
	h.clock.Step(res.RequeueAfter)
	h.reconcile(d)
	if h.patchCount() != n {
		t.Errorf("the unchanged condition was written again")
	}

	pf.down = false
	h.clock.Step(time.Minute)
	h.reconcile(d)
	cond = meta.FindStatusCondition(h.get().Status.Daemon.Conditions, prefetch.ConditionAvailable)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != prefetch.ReasonRuntimeAvailable {
		t.Errorf("condition once the runtime answers %+v, want PrefetchAvailable True", cond)
	}
}

// TestDaemonRuntimeAlwaysUpWritesNoCondition: a daemon whose runtime
// always answered writes no condition (the twin's traces stay as they
// were).
func TestDaemonRuntimeAlwaysUpWritesNoCondition(t *testing.T) {
	h := newHarness(t, v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA})
	d := New(node, h.client, &fakeHost{t: t, obs: onOld()}, h.clock, logr.Discard())
	d.Prefetch = &downRuntime{}
	h.reconcile(d)
	if c := h.get().Status.Daemon.Conditions; len(c) != 0 {
		t.Errorf("conditions %+v, want none", c)
	}
}

// createdPrefetcher records the RecordCreated each Sync is given.
type createdPrefetcher struct{ seen []time.Time }

func (p *createdPrefetcher) Sync(_ context.Context, _ time.Time, _ []v1alpha1.NodePinnedImageSet, current []v1alpha1.PinnedSetProgress, env prefetch.Env) ([]v1alpha1.PinnedSetProgress, time.Duration, error) {
	p.seen = append(p.seen, env.RecordCreated)
	return current, 0, nil
}

// TestDaemonPrefetchKnowsTheRecordsAge: the prefetch is told when the
// BootcNode it reads was created, so that it keeps its pins on a record
// just made whose sets the PinnedImageSet controller has not written yet
// (prefetch.Config.UnpinGrace).
func TestDaemonPrefetchKnowsTheRecordsAge(t *testing.T) {
	h := newHarness(t, v1alpha1.BootcNodeSpec{Pool: "p"})
	made := metav1.NewTime(t0.Add(-3 * time.Second))
	bn := h.get()
	bn.CreationTimestamp = made
	if err := h.raw.Update(context.Background(), bn); err != nil {
		t.Fatal(err)
	}
	if got := h.get().CreationTimestamp; !got.Equal(&made) {
		t.Fatalf("the fake kept creationTimestamp %v, want %v", got, made)
	}
	d := New(node, h.client, &fakeHost{t: t, obs: onOld()}, h.clock, logr.Discard())
	pf := &createdPrefetcher{}
	d.Prefetch = pf
	h.reconcile(d)
	if len(pf.seen) == 0 {
		t.Fatal("no prefetch pass")
	}
	for _, got := range pf.seen {
		if !got.Equal(made.Time) {
			t.Errorf("RecordCreated %v, want the record's creationTimestamp %v", got, made.Time)
		}
	}
}
