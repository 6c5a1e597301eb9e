package nodedaemon

import (
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestForgetLastRebootRebootsAgain is TestDaemonNoSecondRebootAfterFailedBoot
// with the deliberately broken ForgetLastReboot: each new daemon process
// disregards the record, so after the failed boot it stages the image
// again and reboots into it a second time.
func TestForgetLastRebootRebootsAgain(t *testing.T) {
	h := newHarness(t, v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA, BootOrder: order(imgA)})
	host := &fakeHost{t: t, obs: stagedObs(), rebootInto: imgOld}
	broken := func() *Daemon {
		d := New(node, h.client, host, h.clock, logr.Discard())
		d.TestOnly = TestOnly{ForgetLastReboot: true}
		return d
	}
	h.reconcile(broken())
	if h.get().Status.Daemon.LastReboot == nil {
		t.Fatal("the first reboot was not recorded")
	}
	h.clock.Step(5 * time.Minute)
	h.reconcile(broken()) // the process after the failed boot: stages again
	host.finishStage("")
	h.reconcile(broken())
	if got, want := host.calls, []string{"Apply " + imgA, "Stage " + imgA, "Apply " + imgA}; !slices.Equal(got, want) {
		t.Errorf("calls = %v, want %v", got, want)
	}
}

// TestZeroTestOnlyChangesNothing: the zero TestOnly keeps the
// protection against a second reboot.
func TestZeroTestOnlyChangesNothing(t *testing.T) {
	h := newHarness(t, v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA, BootOrder: order(imgA)})
	host := &fakeHost{t: t, obs: stagedObs(), rebootInto: imgOld}
	for range 3 {
		d := New(node, h.client, host, h.clock, logr.Discard())
		d.TestOnly = TestOnly{}
		h.reconcile(d)
		h.clock.Step(5 * time.Minute)
	}
	if got, want := host.calls, []string{"Apply " + imgA}; !slices.Equal(got, want) {
		t.Errorf("calls = %v, want %v", got, want)
	}
	if got := h.phase(); got != v1alpha1.DaemonError {
		t.Errorf("phase %s, want Error", got)
	}
}
