package cluster

import (
	"time"

	"github.com/bootroll/bootroll/sim/scenario"
)

// This file is the host and registry faults a scenario injects beyond a
// node crash: a power cycle, a long reboot, a boot that fails in a given
// way, a registry outage, slow pulls and a filling disk.

// The timing of the misbehaving boots.
const (
	// CrashLoopBootAttempts is how many times a crash-looping image is
	// booted before the bootloader falls back to the previous deployment:
	// greenboot's default boot counter (GREENBOOT_MAX_BOOT_ATTEMPTS=3).
	CrashLoopBootAttempts = 3
	// CrashLoopPanic is how long a crash-looping boot runs before it
	// panics and the machine restarts; the node never gets Ready.
	CrashLoopPanic = 20 * time.Second
	// FlapReady and FlapNotReady are how long a node running a Flapping
	// image stays Ready and then NotReady, over and over.
	FlapReady    = 2 * time.Minute
	FlapNotReady = 40 * time.Second
)

// ReasonNetworkNotReady is the Ready condition's reason on a node whose
// image boots with a container network that never comes up.
const ReasonNetworkNotReady = "NetworkPluginNotReady"

// crashLoop handles a boot into to that crash-loops: it reports true while
// the boot counter lasts (the host restarts and tries to again), false
// when it has run out and the boot falls back to the booted deployment.
func (h *host) crashLoop(to *deployment) bool {
	h.loopAttempts++
	if h.loopAttempts >= CrashLoopBootAttempts {
		h.c.trace("node/boot-crash", h.object(), map[string]any{"image": to.ref, "attempt": h.loopAttempts, "next": "fall back"})
		return false
	}
	h.bootN++
	h.c.trace("node/boot-crash", h.object(), map[string]any{"image": to.ref, "attempt": h.loopAttempts, "next": "retry"})
	// The next boot tries the same deployment again.
	h.failNext = scenario.BootCrashLoop
	d := CrashLoopPanic + h.c.sc.Host.Reboot.Sample(h.c.eng.Rand())
	h.event = h.c.eng.After(d, "node/boot/"+h.n.name, h.boot)
	return true
}

// flapDown turns a node running a Flapping image NotReady for a while;
// its daemon keeps running.
func (h *host) flapDown() {
	h.flapH = nil
	if h.state != hostUp {
		return
	}
	h.c.nodeDown(h.n, "KubeletNotReady")
	h.flapH = h.c.eng.After(FlapNotReady, "node/flap/"+h.n.name, h.flapUp)
}

// flapUp turns a flapping node Ready again.
func (h *host) flapUp() {
	h.flapH = nil
	if h.state != hostUp {
		return
	}
	h.c.nodeUp(h.n)
	h.flapH = h.c.eng.After(FlapReady, "node/flap/"+h.n.name, h.flapDown)
}

// stopFlapping ends the flapping of this boot.
func (h *host) stopFlapping() {
	h.flapH.Cancel()
	h.flapH = nil
}

// PowerCycle switches a node off and, after offFor, on again: as CrashNode,
// traced as node/power-cycle.
func (c *Cluster) PowerCycle(node string, offFor time.Duration) error {
	n, err := c.liveNode(node, "power-cycling a node")
	if err != nil {
		return err
	}
	n.host.crash(offFor, "node/power-cycle")
	return nil
}

// LongReboot makes the node's reboot in progress, or else its next
// requested reboot, take d from the request until the node is Ready.
func (c *Cluster) LongReboot(node string, d time.Duration) error {
	n, err := c.liveNode(node, "slowing the reboot of a node")
	if err != nil {
		return err
	}
	h := n.host
	if h.state == hostDown && h.bootClean && h.requested && h.event != nil && h.loopAttempts == 0 {
		at := h.requestAt.Add(d)
		if at.After(h.event.When()) {
			h.event.Cancel()
			h.event = c.eng.At(at, "node/boot/"+n.name, h.boot)
		}
		c.trace("node/long-reboot", h.object(), map[string]any{"duration": d.String(), "while": "rebooting"})
		return nil
	}
	h.longNext = d
	return nil
}

// FailNextBoot makes the node's next boot into a deployment other than
// the booted one fail in the given way, whatever the image.
func (c *Cluster) FailNextBoot(node string, mode scenario.BootFailure) error {
	n, err := c.liveNode(node, "failing the next boot of a node")
	if err != nil {
		return err
	}
	n.host.failNext = mode
	return nil
}

// RegistryOutage makes every pull (OS staging and pinned images) that
// starts in the next d fail at once.
func (c *Cluster) RegistryOutage(d time.Duration) {
	if until := c.eng.Now().Add(d); until.After(c.outageUntil) {
		c.outageUntil = until
	}
	c.trace("registry/outage", "registry", map[string]any{"for": d.String()})
}

// registryDown reports whether the registry is out now.
func (c *Cluster) registryDown() bool { return c.eng.Now().Before(c.outageUntil) }

// registryError is the error of a pull during an outage.
const registryError = "pinging container registry: received unexpected HTTP status: 503 Service Unavailable"

// SlowPulls makes the downloads that start in the next d factor times
// slower.
func (c *Cluster) SlowPulls(d time.Duration, factor int) {
	c.slowUntil, c.slowFactor = c.eng.Now().Add(d), max(factor, 1)
	c.trace("registry/slow", "registry", map[string]any{"for": d.String(), "factor": factor})
}

// pullBandwidth is the download rate of a pull that starts now.
func (c *Cluster) pullBandwidth() int64 {
	bw := c.sc.Host.PullBandwidth.Value()
	if c.eng.Now().Before(c.slowUntil) && c.slowFactor > 1 {
		bw = max(bw/int64(c.slowFactor), 1)
	}
	return bw
}

// FillDisk takes size bytes (at most what is free) of the node's image
// filesystem for d, or for good when d is 0. It returns the bytes taken.
func (c *Cluster) FillDisk(node string, size int64, d time.Duration) (int64, error) {
	n, err := c.liveNode(node, "filling the disk of a node")
	if err != nil {
		return 0, err
	}
	f := n.host.fs()
	take := min(size, f.available())
	f.used += take
	details := map[string]any{"bytes": take, "available": f.available()}
	if d > 0 {
		details["for"] = d.String()
		c.eng.After(d, "node/disk-free/"+n.name, func() {
			f.used -= take
			c.trace("node/disk-freed", "node/"+n.name, map[string]any{"bytes": take, "available": f.available()})
		})
	}
	c.trace("node/disk-fill", "node/"+n.name, details)
	return take, nil
}
