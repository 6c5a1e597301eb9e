package cluster

import (
	"fmt"
	"math/bits"
	"strconv"
	"time"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/engine"
	"github.com/bootroll/bootroll/sim/scenario"
)

// hostState is what the machine is doing.
type hostState int

const (
	hostUp           hostState = iota // running; the Node is Ready
	hostShuttingDown                  // a reboot was requested; still Ready
	hostDown                          // rebooting or crashed
	hostHung                          // booted an image that never gets Ready
	hostRemoved                       // the Node was deleted
)

// deployment is one bootc deployment on a host.
type deployment struct {
	im  *scenario.Image
	ref string // the reference it was staged from
	// downloadOnly is set from staging until Apply unlocks it; a reboot
	// other than Apply's discards a download-only deployment.
	downloadOnly bool
	// flaps is set on a deployment that booted in the Flapping way: the
	// node flaps NotReady and Ready for as long as it boots it.
	flaps bool
	// netDown is set on a deployment that booted in the NetworkNotReady
	// way: the kubelet reports NotReady for as long as it boots it, while
	// host-network pods (the daemon) run.
	netDown bool
}

func (d *deployment) hostImage() *v1alpha1.HostImage {
	if d == nil {
		return nil
	}
	return &v1alpha1.HostImage{Image: d.ref, Digest: d.im.Digest}
}

func describe(d *deployment) string {
	if d == nil {
		return "none"
	}
	return d.ref
}

// host is the simulated bootc host of a node and its daemon process. The
// daemon drives it through the production adapters (bootc.go): its bootc
// and systemctl commands run here on virtual time, a stage's download
// ends in an engine event, and a reboot goes down after a shutdown delay
// and comes back after host.reboot.
type host struct {
	c *Cluster
	n *node

	booted, staged, rollback *deployment
	rollbackQueued           bool
	bootN                    int
	bootIDOf                 int    // the bootN of bootIDStr
	bootIDStr                string // bootID() of boot bootIDOf, "" before the first call
	state                    hostState
	event                    *engine.Handle // the pending shutdown or boot
	bootClean                bool           // the pending boot follows a clean shutdown
	requested                bool           // a reboot was requested in this boot
	badBoot                  bool           // this boot never gets Ready

	daemonUp    bool
	daemonStart *engine.Handle
	stage       *stageRun
	// proc is the running daemon process's hold on the host: its
	// adapters and prefetch runner (bootc.go), set when nodedaemon.Wire
	// builds them and dropped when the process stops.
	proc *daemonProc
	// status caches the bootc status document of statusKey's state.
	status    []byte
	statusKey statusKey

	reboots      int
	requestedFor map[string]int // by digest

	// Host faults (faults.go).
	requestAt    time.Time            // when the last reboot was requested
	longNext     time.Duration        // the next requested reboot takes this long
	failNext     scenario.BootFailure // the next boot into a new image fails this way
	loopAttempts int                  // failed boots of the crash loop so far
	flapH        *engine.Handle       // the next flap of a Flapping image

	// Health faults (health.go): what the next boot brings, and what
	// this boot has.
	healthNext health
	dsHeld     map[string]time.Time // DaemonSet pods held not Ready, until (zero: this boot)
	condH      []*engine.Handle     // the pending ends of this boot's conditions
	flapsLeft  int                  // NotReady flaps this boot still has
	flapSpec   *scenario.ReadyFlapsAfterBoot

	imgfs *imageFs // the image filesystem (imagefs.go)
}

// stageRun is a stage in progress: the background stage of the daemon's
// AsyncHost, from its start until it ends at done.
type stageRun struct {
	image string
	im    *scenario.Image
	done  *engine.Handle
	// err is how `bootc switch --download-only` ends; "" stages im.
	err string
	// avail is the free space when the stage started, what the space
	// check (which production runs first) reads.
	avail int64
}

func newHost(c *Cluster, n *node) *host {
	return &host{
		c: c, n: n,
		booted:       &deployment{im: n.g.boot, ref: c.digestRef(n.g.boot)},
		bootN:        1,
		requestedFor: map[string]int{},
	}
}

// bootID is the host's boot ID, "NODE-boot-N" for its Nth boot. Made once
// per boot: every daemon pass reads it (a Sprintf each was 1% of a long
// twin run).
func (h *host) bootID() string {
	if h.bootIDStr == "" || h.bootIDOf != h.bootN {
		h.bootIDStr, h.bootIDOf = h.n.name+"-boot-"+strconv.Itoa(h.bootN), h.bootN
	}
	return h.bootIDStr
}

// kubeletRuns reports whether the machine is up and healthy enough to run
// pods.
func (h *host) kubeletRuns() bool { return h.state == hostUp || h.state == hostShuttingDown }

func (h *host) object() string { return "node/" + h.n.name }

// usable refuses calls while the daemon process is not running: a call
// then can only come from a daemon the runner should have stopped.
func (h *host) usable(op string) error {
	if !h.daemonUp {
		return fmt.Errorf("%s on node %s: %w", op, h.n.name, ErrNotRunning)
	}
	return nil
}

// downloadTime is size bytes at bw bytes per second, exactly; a zero
// bandwidth downloads at once.
func downloadTime(size, bw int64) time.Duration {
	if size <= 0 || bw <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(size), uint64(time.Second))
	if hi >= uint64(bw) {
		return time.Duration(1<<63 - 1)
	}
	q, _ := bits.Div64(hi, lo, uint64(bw))
	if q > 1<<63-1 {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(q)
}

func (h *host) stageDone(run *stageRun) {
	h.fs().stageEnd(true, run.im.Size.Value())
	h.staged = &deployment{im: run.im, ref: run.image, downloadOnly: true}
	if h.c.tracing() {
		h.c.trace("node/stage-done", h.object(), map[string]any{"image": run.image})
	}
}

// abortStage kills a stage in progress: nothing is staged.
func (h *host) abortStage(reason string) {
	if h.stage == nil {
		return
	}
	h.stage.done.Cancel()
	h.fs().stageEnd(false, 0)
	h.c.trace("node/stage-abort", h.object(), map[string]any{"image": h.stage.image, "reason": reason})
	h.stage = nil
}

// next is the deployment the next boot boots: a queued rollback, else an
// unlocked staged deployment after a clean shutdown, else the booted one,
// except that a boot that never got Ready falls back to the rollback
// deployment (as greenboot does).
func (h *host) next(clean bool) *deployment {
	switch {
	case h.rollbackQueued && h.rollback != nil:
		return h.rollback
	case clean && h.staged != nil && !h.staged.downloadOnly:
		return h.staged
	case h.badBoot && h.rollback != nil:
		return h.rollback
	}
	return h.booted
}

// requestReboot starts a reboot: the host goes down after the shutdown
// delay and is Ready again host.reboot after the request.
func (h *host) requestReboot(reason string) {
	to := h.next(true)
	h.requested = true
	h.requestedFor[to.im.Digest]++
	h.state = hostShuttingDown
	total := h.c.sc.Host.Reboot.Sample(h.c.eng.Rand())
	if h.longNext > 0 {
		total, h.longNext = h.longNext, 0
		h.c.trace("node/long-reboot", h.object(), map[string]any{"duration": total.String()})
	}
	h.requestAt = h.c.eng.Now()
	down := min(ShutdownDelay, total/2)
	if h.c.tracing() {
		h.c.trace("node/reboot-request", h.object(), map[string]any{"from": h.booted.ref, "to": to.ref, "reason": reason})
	}
	if h.c.hooks.Reboot != nil {
		h.c.hooks.Reboot(h.n.name, h.c.digestRef(h.booted.im), h.c.digestRef(to.im))
	}
	h.event = h.c.eng.After(down, "node/shutdown/"+h.n.name, func() { h.shutdown(total - down) })
}

// shutdown takes the host down for a requested reboot.
func (h *host) shutdown(rest time.Duration) {
	h.event = nil
	h.stopFlapping()
	if h.longNext > 0 {
		// A long reboot that hit while the host was shutting down.
		rest = max(h.requestAt.Add(h.longNext).Sub(h.c.eng.Now()), 0)
		h.c.trace("node/long-reboot", h.object(), map[string]any{"duration": h.longNext.String()})
		h.longNext = 0
	}
	if h.c.tracing() {
		h.c.trace("node/reboot-start", h.object(), map[string]any{"from": h.booted.ref, "to": h.next(true).ref})
	}
	h.abortStage("reboot")
	h.daemonDown("reboot")
	h.state, h.bootClean = hostDown, true
	h.c.nodeDown(h.n, "Rebooting")
	h.event = h.c.eng.After(rest, "node/boot/"+h.n.name, h.boot)
}

// crash takes the host down hard for downFor; kind is the trace kind
// (node/crash, node/power-cycle).
func (h *host) crash(downFor time.Duration, kind string) {
	switch h.state {
	case hostRemoved:
		return
	case hostDown:
		at := h.c.eng.Now().Add(downFor)
		if w := h.event; w != nil && w.When().After(at) {
			at = w.When()
		}
		h.event.Cancel()
		h.event = h.c.eng.At(at, "node/boot/"+h.n.name, h.boot)
		h.c.trace(kind, h.object(), map[string]any{"downFor": downFor.String(), "while": "down"})
		return
	}
	wasUp := h.kubeletRuns()
	h.c.trace(kind, h.object(), map[string]any{"downFor": downFor.String()})
	h.event.Cancel()
	h.stopFlapping()
	h.abortStage("node crash")
	h.daemonDown("node crash")
	h.state, h.bootClean, h.requested = hostDown, false, false
	switch {
	case wasUp && h.n.ready:
		// Nobody tells the API: the node lifecycle controller notices
		// after its grace period.
		h.c.kubeletStopped(h.n)
	case !h.n.ready:
		// A hung boot or a flap had it NotReady already; its pods are
		// unready and the lifecycle controller's clock runs.
		h.c.notReadyEviction(h.n)
	}
	h.event = h.c.eng.After(downFor, "node/boot/"+h.n.name, h.boot)
}

// boot ends a reboot or a crash. Booting into an image that fails to boot
// falls back to the deployment booted before (FallBack) or never gets
// Ready (NeverReady). Any staged deployment is gone afterwards: booted,
// or discarded as download-only or unfinalized.
func (h *host) boot() {
	h.event = nil
	clean := h.bootClean
	prev, to := h.booted, h.next(clean)
	outcome := "booted"
	h.badBoot = false
	if to != prev {
		mode := scenario.BootFailure("")
		switch {
		case h.failNext != "":
			mode, h.failNext = h.failNext, ""
		case to.im.FailsToBoot:
			mode = to.im.BootFailure
		}
		switch mode {
		case scenario.BootNeverReady:
			h.booted, h.rollback = to, prev
			h.badBoot = true
			outcome = "never-ready"
		case scenario.BootFallBack:
			outcome = "fell-back"
		case scenario.BootCrashLoop:
			if h.crashLoop(to) {
				return
			}
			outcome = "fell-back"
		case scenario.BootFlapping:
			h.booted, h.rollback = to, prev
			to.flaps = true
			outcome = "flapping"
		case scenario.BootNetworkNotReady:
			h.booted, h.rollback = to, prev
			to.netDown = true
			outcome = "network-not-ready"
		default:
			h.booted, h.rollback = to, prev
		}
	}
	h.loopAttempts = 0
	h.staged, h.rollbackQueued, h.requested = nil, false, false
	h.fs().booted()
	h.bootN++
	kind := "node/crash-boot"
	if clean {
		h.reboots++
		kind = "node/reboot-done"
	}
	if h.c.tracing() {
		h.c.trace(kind, h.object(), map[string]any{"from": prev.ref, "booted": h.booted.ref, "bootID": h.bootID(), "outcome": outcome})
	}
	if h.badBoot {
		h.state = hostHung
		return
	}
	h.state = hostUp
	h.healthBoot()
	if h.booted.netDown {
		// The kubelet runs but the container network never comes up: the
		// Node stays NotReady, its pods do not start, and the daemon (a
		// host-network pod tolerating not-ready) runs.
		h.c.setReady(h.n, false, ReasonNetworkNotReady)
		h.c.notReadyEviction(h.n)
		h.scheduleDaemon(0)
		return
	}
	h.c.nodeUp(h.n)
	h.scheduleDaemon(0)
	if h.booted.flaps {
		h.flapH = h.c.eng.After(FlapReady, "node/flap/"+h.n.name, h.flapDown)
	} else if h.flapsLeft > 0 {
		h.flapH = h.c.eng.After(h.flapSpec.Ready, "node/flap/"+h.n.name, h.faultFlapDown)
	}
}

// scheduleDaemon starts the daemon after wait plus host.daemonStartup.
func (h *host) scheduleDaemon(wait time.Duration) {
	d := wait + h.c.sc.Host.DaemonStartup.Sample(h.c.eng.Rand())
	h.daemonStart = h.c.eng.After(d, "node/daemon-start/"+h.n.name, func() {
		h.daemonStart = nil
		if !h.daemonUp && h.kubeletRuns() {
			if h.c.tracing() {
				h.c.trace("node/daemon-start", h.object(), map[string]any{"bootID": h.bootID()})
			}
		}
		h.startDaemon()
	})
}

// startDaemon starts the daemon process: it knows of no stage.
func (h *host) startDaemon() {
	if h.daemonUp || !h.kubeletRuns() {
		return
	}
	h.daemonUp, h.proc = true, nil
	if h.c.hooks.DaemonRestarted != nil {
		h.c.hooks.DaemonRestarted(h.n.name)
	}
}

// daemonDown stops the daemon process, or a pending start of it.
func (h *host) daemonDown(reason string) {
	h.daemonStart.Cancel()
	h.daemonStart = nil
	if !h.daemonUp {
		return
	}
	h.daemonUp = false
	h.stopPrefetch(reason)
	h.proc = nil
	if h.c.tracing() {
		h.c.trace("node/daemon-down", h.object(), map[string]any{"reason": reason})
	}
	if h.c.hooks.DaemonDown != nil {
		h.c.hooks.DaemonDown(h.n.name)
	}
}

// remove ends the host with its Node.
func (h *host) remove() {
	h.event.Cancel()
	h.stopFlapping()
	h.abortStage("node removed")
	h.daemonDown("node removed")
	h.state = hostRemoved
}
