package nodedaemon

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/nodedaemon/bootc"
)

// BootcHost is the Host of a real bootc system: it runs the bootc CLI
// through Bootc and reads the boot ID from BootIDPath. Its Stage blocks for
// the whole download; wrap it in an AsyncHost.
type BootcHost struct {
	Bootc *bootc.Client
	// BootIDPath is the boot ID file; empty means bootc.DefaultBootIDPath.
	BootIDPath string
	// BootID, when set, reads the boot ID instead of BootIDPath: the twin
	// passes its simulated host's. Production leaves it nil.
	BootID func() (string, error)
}

var _ Host = BootcHost{}

// errContainer is returned when bootc reports that it runs in a container
// rather than on a booted bootc host.
var errContainer = errors.New("bootc status reports a container, not a booted bootc host: run the daemon with the host's mount and PID namespaces")

// Observe implements Host from bootc status and the boot ID file. Staging
// and LastStage stay empty: the synchronous host has no background stage.
func (h BootcHost) Observe(ctx context.Context) (Observation, error) {
	st, err := h.Bootc.Status(ctx)
	if err != nil {
		return Observation{}, err
	}
	if st.IsContainer {
		return Observation{}, errContainer
	}
	readBootID := h.BootID
	if readBootID == nil {
		readBootID = func() (string, error) { return bootc.ReadBootID(h.BootIDPath) }
	}
	bootID, err := readBootID()
	if err != nil {
		return Observation{}, err
	}
	obs := Observation{RollbackQueued: st.RollbackQueued, BootID: bootID}
	// The deployments' images share one allocation, sized to those there
	// are: one per deployment was most of what an Observe allocated, at
	// every daemon pass. Every Observe has its own: no two observations
	// share an image.
	n := 0
	for _, d := range [...]*bootc.Deployment{st.Booted, st.Staged, st.Rollback} {
		if d != nil {
			n++
		}
	}
	room := make([]v1alpha1.HostImage, 0, n)
	obs.Booted = hostImageOf(&room, st.Booted)
	obs.Staged = hostImageOf(&room, st.Staged)
	obs.Rollback = hostImageOf(&room, st.Rollback)
	return obs, nil
}

// ShuttingDown implements Host from systemd's state.
func (h BootcHost) ShuttingDown(ctx context.Context) (bool, error) {
	return h.Bootc.ShuttingDown(ctx)
}

// hostImageOf converts a bootc deployment into the next image of room,
// which has room for it; nil stays nil.
func hostImageOf(room *[]v1alpha1.HostImage, d *bootc.Deployment) *v1alpha1.HostImage {
	if d == nil {
		return nil
	}
	*room = append(*room, v1alpha1.HostImage{Image: d.Image, Digest: d.Digest, Version: d.Version})
	h := &(*room)[len(*room)-1]
	if d.Timestamp != nil {
		// The API keeps seconds; truncating here keeps reports stable.
		t := metav1.NewTime(d.Timestamp.UTC().Truncate(time.Second))
		h.Timestamp = &t
	}
	return h
}

// Stage implements Host; it returns when bootc has staged image
// (download-only: no reboot boots it before Apply).
func (h BootcHost) Stage(ctx context.Context, image string) error {
	return h.Bootc.Stage(ctx, image)
}

// Apply implements Host.
func (h BootcHost) Apply(ctx context.Context, image string) error {
	return h.Bootc.Apply(ctx, image)
}

// Rollback implements Host.
func (h BootcHost) Rollback(ctx context.Context) error {
	return h.Bootc.Rollback(ctx)
}

// Reboot implements Host.
func (h BootcHost) Reboot(ctx context.Context) error {
	return h.Bootc.Reboot(ctx)
}
