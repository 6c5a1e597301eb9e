// Package hostmode plays many nodes' hosts against a real API server: the
// real node daemon (nodedaemon.Wire over the production adapters,
// AsyncHost over SpaceCheckedHost over BootcHost over bootc.Client) runs
// for each played Node, and only what those adapters exec or read is
// simulated, from a scenario file: the bootc and systemctl commands, the
// boot ID, the image sizes and the free space. Staging takes the image's
// size over host.pullBandwidth plus host.stageOverhead on a real clock; a
// reboot annotates the Node bootroll.dev/rebooting (a KWOK stage of
// `bootroll cluster up` makes it NotReady meanwhile), lasts a draw of
// host.reboot, and comes back with a new boot ID in the Node's
// status.nodeInfo.bootID. See docs/host-mode.md.
//
// It is edge code: it runs goroutines and reads a clock.Clock, which tests
// pass as a fake. The decisions (what a boot boots, how long a stage
// takes, what a node boots first) are plain functions.
package hostmode

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/bootroll/bootroll/internal/imageref"
	"github.com/bootroll/bootroll/nodedaemon/bootc"
	"github.com/bootroll/bootroll/sim/cluster"
	"github.com/bootroll/bootroll/sim/scenario"
)

// deployment is one bootc deployment of a simulated host.
type deployment struct {
	im  *scenario.Image
	ref string // the reference it was staged from
	// downloadOnly is set from staging until `bootc switch
	// --from-downloaded` unlocks it.
	downloadOnly bool
}

// Deployments are a host's bootc deployments and boot order: what a boot
// decides from and changes.
type Deployments struct {
	Booted, Staged, Rollback *deployment
	RollbackQueued           bool
}

// Outcome is how a boot ended, as the API sees it.
type Outcome string

// The outcomes of a boot.
const (
	// Booted: the node boots the next deployment and is Ready.
	Booted Outcome = "booted"
	// FellBack: the new deployment failed to boot and the bootloader went
	// back to the one booted before; the node is Ready on it.
	FellBack Outcome = "fell-back"
	// NeverReady: the node boots the new deployment and stays NotReady,
	// its daemon does not run.
	NeverReady Outcome = "never-ready"
	// NetworkNotReady: the node boots the new deployment and stays
	// NotReady, but its daemon runs.
	NetworkNotReady Outcome = "network-not-ready"
	// Flapping: the node boots the new deployment and flaps between Ready
	// and NotReady; its daemon runs.
	Flapping Outcome = "flapping"
)

// Boot is the outcome of a boot of d, a reboot the host asked for (clean)
// or not, failing in the way mode says when it goes into a deployment
// other than the booted one (mode "" when the image boots). It returns the
// deployments after the boot, the outcome, and how many boot attempts it
// took (more than 1 for a crash loop). As sim/cluster's host: the next
// boot is a queued rollback, else an unlocked staged deployment after a
// clean shutdown, else the booted one; any staged deployment is gone
// afterwards.
func Boot(d Deployments, clean bool, mode scenario.BootFailure) (Deployments, Outcome, int) {
	prev, to := d.Booted, nextBoot(d, clean)
	next := Deployments{Booted: prev, Rollback: d.Rollback}
	if to == prev {
		return next, Booted, 1
	}
	if mode == "" && to.im.FailsToBoot {
		mode = to.im.BootFailure
	}
	upgraded := Deployments{Booted: &deployment{im: to.im, ref: to.ref}, Rollback: prev}
	switch mode {
	case scenario.BootFallBack:
		return next, FellBack, 1
	case scenario.BootCrashLoop:
		return next, FellBack, cluster.CrashLoopBootAttempts
	case scenario.BootNeverReady:
		return upgraded, NeverReady, 1
	case scenario.BootNetworkNotReady:
		return upgraded, NetworkNotReady, 1
	case scenario.BootFlapping:
		return upgraded, Flapping, 1
	}
	return upgraded, Booted, 1
}

// nextBoot is the deployment the next boot boots.
func nextBoot(d Deployments, clean bool) *deployment {
	switch {
	case d.RollbackQueued && d.Rollback != nil:
		return d.Rollback
	case clean && d.Staged != nil && !d.Staged.downloadOnly:
		return d.Staged
	}
	return d.Booted
}

// DaemonRuns reports whether the node daemon runs after a boot with
// outcome o: not on a node that never gets Ready (its kubelet never starts
// the daemon's pod).
func (o Outcome) DaemonRuns() bool { return o != NeverReady }

// Ready reports whether the node is Ready after a boot with outcome o (a
// flapping node at first).
func (o Outcome) Ready() bool { return o != NeverReady && o != NetworkNotReady }

// StageTime is how long staging an image of size bytes takes at bw bytes
// per second, plus overhead; a zero bandwidth downloads at once.
func StageTime(size, bw int64, overhead time.Duration) time.Duration {
	if size <= 0 || bw <= 0 {
		return overhead
	}
	hi, lo := bits.Mul64(uint64(size), uint64(time.Second))
	if hi >= uint64(bw) {
		return 1<<63 - 1
	}
	q, _ := bits.Div64(hi, lo, uint64(bw))
	if q > 1<<63-1-uint64(max(overhead, 0)) {
		return 1<<63 - 1
	}
	return time.Duration(q) + overhead
}

// RebootTime is how long a reboot with attempts boot attempts takes until
// the node is up: one draw of host.reboot, or long when a longReboot
// fault set it, and for each further attempt of a crash loop the panic
// and another draw.
func RebootTime(h scenario.Host, r *rand.Rand, long time.Duration, attempts int) time.Duration {
	d := h.Reboot.Sample(r)
	if long > 0 {
		d = long
	}
	for range attempts - 1 {
		d += cluster.CrashLoopPanic + h.Reboot.Sample(r)
	}
	return d
}

// lookup finds a scenario image by reference: a digest reference by its
// digest, else by its ref.
func lookup(sc *scenario.Scenario, ref string) *scenario.Image {
	dig := imageref.Digest(ref)
	for i := range sc.Images {
		im := &sc.Images[i]
		if dig != "" && im.Digest == dig || im.Ref == ref {
			return im
		}
	}
	return nil
}

// Host is the simulated host of one node: its bootc deployments, boot ID
// and what its commands take, on a real (or a test's fake) clock. It
// implements bootc.Runner, the one edge the production adapters exec
// through. Its methods are safe for concurrent use.
type Host struct {
	node string
	sc   *scenario.Scenario
	clk  clock.Clock

	mu  sync.Mutex
	rng *rand.Rand
	d   Deployments
	// bootID is the current boot's ID; epoch counts boots, so that a stage
	// that outlived a reboot stages nothing.
	bootID string
	epoch  int
	// down is set from the reboot request until the boot.
	down bool
	// requested is set when a reboot was asked for in this boot.
	requested bool
	failNext  scenario.BootFailure
	longNext  time.Duration
	// available is the free space of the filesystem bootc stages to.
	available int64
	// onReboot is called (without the lock) when `systemctl reboot` runs.
	onReboot func()
}

var _ bootc.Runner = (*Host)(nil)

// NewHost returns the host of node booted into booted (a scenario image,
// staged from ref), with boot ID bootID, drawing from rng; onReboot is
// called when the daemon runs `systemctl reboot` and must not block.
func NewHost(node string, sc *scenario.Scenario, clk clock.Clock, rng *rand.Rand, booted *scenario.Image, ref, bootID string, available int64, onReboot func()) *Host {
	return &Host{
		node: node, sc: sc, clk: clk, rng: rng,
		d:         Deployments{Booted: &deployment{im: booted, ref: ref}},
		bootID:    bootID,
		available: available,
		onReboot:  onReboot,
	}
}

// BootID is the kernel's boot ID (nodedaemon.HostEdges.BootID).
func (h *Host) BootID() (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bootID, nil
}

// Up reports whether the host is running: not between a reboot request
// and the boot that ends it.
func (h *Host) Up() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.down
}

// Booted returns the booted image's reference and the rollback
// deployment's ("" when none).
func (h *Host) Booted() (booted, rollback string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.d.Rollback != nil {
		rollback = h.d.Rollback.ref
	}
	return h.d.Booted.ref, rollback
}

// SetRollback sets the rollback deployment (a host-mode process that
// starts on a Node that says it has one).
func (h *Host) SetRollback(im *scenario.Image, ref string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.d.Rollback = &deployment{im: im, ref: ref}
}

// FailNextBoot makes the next boot into another deployment fail as mode
// says (a bootFailure fault).
func (h *Host) FailNextBoot(mode scenario.BootFailure) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failNext = mode
}

// LongNextReboot makes the next reboot take d (a longReboot fault).
func (h *Host) LongNextReboot(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.longNext = d
}

// StageSize is the registry's answer to the space check's size query
// (nodedaemon.HostEdges.StageSize).
func (h *Host) StageSize(_ context.Context, image string) (int64, error) {
	im := lookup(h.sc, image)
	if im == nil {
		return 0, fmt.Errorf("reading manifest %s: manifest unknown (not among the scenario's images)", image)
	}
	return im.Size.Value(), nil
}

// Statfs is the free space of the filesystem bootc stages to
// (nodedaemon.HostEdges.Statfs): the node group's image filesystem less
// what it uses at the start.
func (h *Host) Statfs(context.Context) (int64, error) { return h.available, nil }

// Run implements bootc.Runner: the commands bootc.Client runs, with the
// outputs and exit errors of the real ones.
func (h *Host) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := strings.Join(append([]string{name}, args...), " ")
	switch {
	case cmd == "bootc status --json --format-version 1":
		h.mu.Lock()
		defer h.mu.Unlock()
		return statusDoc(h.d), nil
	case name == "bootc" && len(args) == 4 && args[0] == "switch" && args[1] == "--download-only" && args[2] == "--":
		return nil, h.stage(ctx, args[3])
	case cmd == "bootc switch --from-downloaded":
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.d.Staged == nil {
			return nil, exitError("error: No staged deployment")
		}
		s := *h.d.Staged
		s.downloadOnly = false
		h.d.Staged = &s
		return nil, nil
	case cmd == "bootc rollback":
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.d.Rollback == nil {
			return nil, exitError("error: No rollback deployment")
		}
		h.d.RollbackQueued, h.d.Staged = true, nil
		return nil, nil
	case cmd == "systemctl is-system-running":
		h.mu.Lock()
		stopping := h.requested // until the boot that ends the reboot
		h.mu.Unlock()
		return cluster.SystemState(stopping)
	case cmd == "systemctl reboot":
		h.mu.Lock()
		first := !h.requested && !h.down
		h.requested = true
		h.mu.Unlock()
		if first && h.onReboot != nil {
			h.onReboot()
		}
		return nil, nil
	}
	return nil, exitError("error: unexpected command " + cmd)
}

// stage downloads image for as long as StageTime says, then stages it
// download-only, unless the host rebooted meanwhile or ctx ended.
func (h *Host) stage(ctx context.Context, image string) error {
	im := lookup(h.sc, image)
	if im == nil {
		return exitError(fmt.Sprintf("error: Switching: Pulling: Creating importer: failed to invoke method OpenImage: reading manifest %s: manifest unknown", image))
	}
	h.mu.Lock()
	if im == h.d.Booted.im {
		h.mu.Unlock()
		return nil // bootc stages nothing; bootc.Client says why
	}
	epoch := h.epoch
	d := StageTime(im.Size.Value(), h.sc.Host.PullBandwidth.Value(), h.sc.Host.StageOverhead.Sample(h.rng))
	h.mu.Unlock()
	select {
	case <-h.clk.After(d):
	case <-ctx.Done():
		return exitError("error: Switching: Pulling: " + ctx.Err().Error())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.epoch != epoch || h.down {
		return exitError("error: Switching: Pulling: interrupted by a reboot")
	}
	h.d.Staged = &deployment{im: im, ref: image, downloadOnly: true}
	return nil
}

// ShutDown takes the host down for a reboot: it returns how long the
// reboot takes (RebootTime) and the outcome of the boot that ends it,
// which Up applies. A reboot not asked for (a crash) is not clean.
func (h *Host) ShutDown() (time.Duration, func() (Outcome, string)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	clean := h.requested
	h.down = true
	h.epoch++
	mode := h.failNext
	next, outcome, attempts := Boot(h.d, clean, mode)
	if nextBoot(h.d, clean) != h.d.Booted {
		h.failNext = "" // used up by this boot into another deployment
	}
	total := RebootTime(h.sc.Host, h.rng, h.longNext, attempts)
	h.longNext = 0
	bootID := newBootID(h.rng)
	return total, func() (Outcome, string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.d, h.bootID = next, bootID
		h.down, h.requested = false, false
		h.epoch++
		return outcome, bootID
	}
}

// newBootID draws a boot ID in the kernel's format (a random UUID).
func newBootID(r *rand.Rand) string {
	var b [16]byte
	for i := 0; i < 16; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// exitError is a command that exited 1 with stderr, as bootc.ExecRunner
// reports it.
func exitError(stderr string) error {
	return &bootc.CommandError{Err: errors.New("exit status 1"), Stderr: stderr}
}

// statusDoc is `bootc status --json --format-version 1` of d, in bootc's
// host-v1 schema (the format of sim/cluster's simulated bootc).
func statusDoc(d Deployments) []byte {
	return cluster.BootcStatusDoc(d.Staged.doc(), d.Booted.doc(), d.Rollback.doc(), d.RollbackQueued)
}

// doc is d as cluster.BootcStatusDoc shows it; nil stays nil.
func (d *deployment) doc() *cluster.BootcDeployment {
	if d == nil {
		return nil
	}
	return &cluster.BootcDeployment{Ref: d.ref, Digest: d.im.Digest, DownloadOnly: d.downloadOnly}
}
