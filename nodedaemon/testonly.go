package nodedaemon

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestOnly holds deliberately broken daemon behaviour for the twin's
// negative controls. Production never sets it; it exists so that each
// invariant can be shown to catch the bug it guards against.
type TestOnly struct {
	// ForgetLastReboot makes the daemon disregard the reboot record
	// (status.daemon.lastReboot) that it finds in its BootcNode, as if a
	// daemon process did not know what an earlier one asked for. A host
	// whose new image failed to boot and came back on the old one is then
	// staged and rebooted into the same image again: the double reboot
	// that the record exists to prevent.
	ForgetLastReboot bool
}

// SetTestOnly breaks the daemon as t says. Call it before the daemon's
// first Reconcile; the zero TestOnly changes nothing.
//
// ForgetLastReboot hides the record from what the daemon reads of its
// BootcNode, so Step sees no earlier reboot. The record this process
// reports itself is still remembered (Daemon.reported), so only a new
// process, such as the one that starts after the reboot, forgets.
func (d *Daemon) SetTestOnly(t TestOnly) {
	if t.ForgetLastReboot {
		if _, done := d.client.(forgetLastReboot); !done {
			d.client = forgetLastReboot{Client: d.client}
		}
	}
}

// forgetLastReboot is a client whose reads of BootcNodes carry no
// status.daemon.lastReboot.
type forgetLastReboot struct {
	client.Client
}

// Get implements client.Reader.
func (c forgetLastReboot) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if bn, ok := obj.(*v1alpha1.BootcNode); ok {
		bn.Status.Daemon.LastReboot = nil
	}
	return nil
}
