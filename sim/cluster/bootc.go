package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bootroll/bootroll/nodedaemon"
	"github.com/bootroll/bootroll/nodedaemon/bootc"
	"github.com/bootroll/bootroll/nodedaemon/prefetch"
	"github.com/bootroll/bootroll/sim/facts"
)

// This file is the host's edge as the daemon reaches it: the production
// adapters (nodedaemon.AsyncHost over SpaceCheckedHost over BootcHost over
// bootc.Client) run unchanged, and only what they exec or read is
// simulated: the bootc and systemctl commands (bootcExec), the boot ID,
// the image size and free space the space check reads, and the background
// of AsyncHost's stage (beginStage: an engine event at the simulated
// download's end instead of a goroutine).

// DaemonEdges returns the simulated edges of the host of node's running
// daemon process, for nodedaemon.Wire: the production adapters it builds
// over them (nodedaemon.Adapters) become the process's when Wire hands
// them to Hold, and every call of theirs fails with ErrNotRunning once the
// process is gone. ok is false for an unknown node.
func (c *Cluster) DaemonEdges(node string) (e nodedaemon.HostEdges, ok bool) {
	n := c.nodes[node]
	if n == nil {
		return nodedaemon.HostEdges{}, false
	}
	return n.host.edges(), true
}

// Host returns the Host the daemon of node drives: the production adapters
// over the node's simulated bootc, one per daemon process.
func (c *Cluster) Host(node string) nodedaemon.Host {
	if n := c.nodes[node]; n != nil {
		d := n.host.held()
		return process{AsyncHost: d.async, h: n.host, d: d}
	}
	return nil
}

// daemonProc is one daemon process's hold on its host: the production
// adapters and prefetch runner over the host's edges, from its start until
// it stops.
type daemonProc struct {
	async *nodedaemon.AsyncHost
	pf    *prefetcher
}

// edges are the host's edges for a new daemon process. Its adapters,
// built by nodedaemon.Adapters over them, become the running process's
// hold when they are passed to Hold.
func (h *host) edges() nodedaemon.HostEdges {
	d := &daemonProc{}
	d.pf = &prefetcher{h: h, pulls: map[string]*pullRun{}}
	return nodedaemon.HostEdges{
		Bootc:     bootcExec{h},
		BootID:    h.readBootID,
		Statfs:    h.stageAvailable,
		Sizes:     registrySizes{h.c},
		StageSize: h.imageSize,
		Images:    criImages{d.pf},
		Wake: func() {
			if h.c.hooks.HostChanged != nil && h.daemonUp && h.proc == d {
				h.c.hooks.HostChanged(h.n.name)
			}
		},
		GoStage:    h.beginStage,
		GoPull:     d.pf.beginPull,
		StageEnded: h.stageEnded,
		Hold: func(a *nodedaemon.AsyncHost, r *prefetch.Runner) (nodedaemon.Host, nodedaemon.Prefetcher) {
			d.async, d.pf.r = a, r
			h.proc = d
			return process{AsyncHost: a, h: h, d: d}, d.pf
		},
	}
}

// held is the running process's hold, made at its first use when no
// nodedaemon.Wire made it (this package's tests drive the host alone).
func (h *host) held() *daemonProc {
	if h.proc == nil {
		e := h.edges()
		e.Hold(nodedaemon.Adapters(e))
	}
	return h.proc
}

// process is the daemon process's hold on its adapters: once the process
// is dead (or replaced by a new one) every call fails with ErrNotRunning,
// as a dead process makes none; a call can then only come from a daemon
// the runner should have stopped.
type process struct {
	*nodedaemon.AsyncHost
	h *host
	d *daemonProc
}

func (p process) live(op string) error {
	if err := p.h.usable(op); err != nil {
		return err
	}
	if p.h.proc != p.d {
		return fmt.Errorf("%s on node %s: %w", op, p.h.n.name, ErrNotRunning)
	}
	return nil
}

func (p process) Observe(ctx context.Context) (nodedaemon.Observation, error) {
	if err := p.live("observe"); err != nil {
		return nodedaemon.Observation{}, err
	}
	return p.AsyncHost.Observe(ctx)
}

func (p process) ShuttingDown(ctx context.Context) (bool, error) {
	if err := p.live("systemctl is-system-running"); err != nil {
		return false, err
	}
	return p.AsyncHost.ShuttingDown(ctx)
}

func (p process) Stage(ctx context.Context, image string) error {
	if err := p.live("stage " + image); err != nil {
		return err
	}
	return p.AsyncHost.Stage(ctx, image)
}

func (p process) Apply(ctx context.Context, image string) error {
	if err := p.live("apply " + image); err != nil {
		return err
	}
	return p.AsyncHost.Apply(ctx, image)
}

func (p process) Rollback(ctx context.Context) error {
	if err := p.live("rollback"); err != nil {
		return err
	}
	return p.AsyncHost.Rollback(ctx)
}

func (p process) Reboot(ctx context.Context) error {
	if err := p.live("reboot"); err != nil {
		return err
	}
	return p.AsyncHost.Reboot(ctx)
}

// stageEnded traces the stages that fail, with the error the daemon sees.
func (h *host) stageEnded(image string, err error) {
	if err != nil {
		h.c.trace("node/stage-fail", h.object(), map[string]any{"image": image, "error": err.Error()})
	}
}

func (h *host) readBootID() (string, error) { return h.bootID(), nil }

// imageSize is the registry's answer to the space check's size query.
func (h *host) imageSize(_ context.Context, image string) (int64, error) {
	im := h.c.imageFor(image)
	switch {
	case h.c.registryDown():
		return 0, errors.New(registryError)
	case im == nil:
		return 0, fmt.Errorf("reading manifest %s: manifest unknown", h.c.digestOf(image))
	}
	return im.Size.Value(), nil
}

// stageAvailable is statfs of the filesystem bootc stages to. The space
// check runs at the start of the background stage, so while one runs it
// reads the free space of that moment.
func (h *host) stageAvailable(context.Context) (int64, error) {
	if h.stage != nil {
		return h.stage.avail, nil
	}
	return h.fs().available(), nil
}

// beginStage is AsyncHost.Go: it starts the download of image and runs
// stage (the adapters' synchronous Stage) when it ends, after
// host.stageOverhead plus size/pullBandwidth. What fails at once in
// production (the space check, an unknown image, a pull fault, the
// registry down, the booted image) ends at once.
func (h *host) beginStage(image string, stage func()) {
	f := h.fs()
	im := h.c.imageFor(image)
	run := &stageRun{image: image, im: im, avail: f.available()}
	var d time.Duration
	switch {
	case im == nil:
		run.err = fmt.Sprintf("error: Switching: Pulling: Creating importer: failed to invoke method OpenImage: reading manifest %s: manifest unknown", h.c.digestOf(image))
	case !h.c.registryDown() && !prefetch.CanStage(run.avail, im.Size.Value()):
		// nodedaemon.SpaceCheckedHost refuses it before bootc runs.
		h.c.starved = append(h.c.starved, facts.StageStarvation{Node: h.n.name, Image: image, Need: prefetch.StagingNeed(im.Size.Value()), Available: run.avail, PinnedHeld: f.bootrollHeld(h.c.pinnedImages())})
	case im == h.booted.im:
		// bootc stages nothing; bootc.Client says why.
	default:
		if fault := h.c.pullFault; fault != nil {
			if err := fault(h.n.name, image); err != nil {
				run.err = fmt.Sprintf("error: Switching: Pulling: %v", err)
				break
			}
		}
		if h.c.registryDown() {
			run.err = "error: Switching: Pulling: " + registryError
			break
		}
		f.stageStart(im.Size.Value())
		d = h.c.sc.Host.StageOverhead.Sample(h.c.eng.Rand()) + downloadTime(im.Size.Value(), h.c.pullBandwidth())
		if h.c.tracing() {
			h.c.trace("node/stage-start", h.object(), map[string]any{"image": image, "duration": d.String()})
		}
	}
	h.stage = run
	run.done = h.c.eng.After(d, "node/stage/"+h.n.name, func() {
		stage()
		if h.stage == run {
			h.stage = nil
		}
	})
}

// statusCmd is the bootc status command the daemon's bootc client runs.
var statusCmd = []string{"bootc", "status", "--json", "--format-version", "1"}

var statusCmdLine = strings.Join(statusCmd, " ")

// bootcExec runs the daemon's host commands on the simulated host, with
// the output and exit errors of the real ones.
type bootcExec struct{ h *host }

var _ bootc.Runner = bootcExec{}

func (x bootcExec) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	h := x.h
	if name == "bootc" && slices.Equal(args, statusCmd[1:]) {
		// The command of every daemon pass: answered without joining it.
		if err := h.usable(statusCmdLine); err != nil {
			return nil, err
		}
		return h.statusDoc(), nil
	}
	cmd := strings.Join(append([]string{name}, args...), " ")
	if err := h.usable(cmd); err != nil {
		return nil, err
	}
	switch {
	case name == "bootc" && len(args) == 4 && args[0] == "switch" && args[1] == "--download-only" && args[2] == "--":
		run := h.stage
		switch {
		case run == nil || run.image != args[3]:
			return nil, exitError("error: Switching: no download of " + args[3] + " was started")
		case run.err != "":
			return nil, exitError(run.err)
		case run.im != h.booted.im:
			h.stageDone(run)
		}
		return nil, nil
	case cmd == "bootc switch --from-downloaded":
		if h.staged == nil {
			return nil, exitError("error: No staged deployment")
		}
		h.staged.downloadOnly = false
		return nil, nil
	case cmd == "bootc rollback":
		if h.rollback == nil {
			return nil, exitError("error: No rollback deployment")
		}
		h.rollbackQueued, h.staged = true, nil
		h.c.trace("node/rollback-queued", h.object(), map[string]any{"image": h.rollback.ref})
		return nil, nil
	case cmd == "systemctl is-system-running":
		return SystemState(h.state == hostShuttingDown)
	case cmd == "systemctl reboot":
		if !h.requested {
			reason := "reboot"
			if h.staged != nil && !h.staged.downloadOnly && !h.rollbackQueued {
				reason = "apply"
			}
			h.requestReboot(reason)
		}
		return nil, nil
	}
	return nil, exitError("error: unexpected command " + cmd)
}

// SystemState is `systemctl is-system-running` on a simulated host: as
// systemd, the state (stopping while a shutdown runs, else running) and
// exit status 1 for any state but running.
func SystemState(stopping bool) ([]byte, error) {
	if stopping {
		return []byte("stopping\n"), exitError("")
	}
	return []byte("running\n"), nil
}

// exitError is a command that exited 1 with stderr, as bootc.ExecRunner
// reports it.
func exitError(stderr string) error {
	return &bootc.CommandError{Err: errors.New("exit status 1"), Stderr: stderr}
}

// statusKey is the host state a bootc status document shows.
type statusKey struct {
	booted, staged, rollback *deployment
	downloadOnly, queued     bool
}

// statusDoc is `bootc status --json --format-version 1` of the host, in
// the format of bootc's host-v1 schema (nodedaemon/bootc/testdata). The
// document is built once per host state: the daemon parses it on every
// observation, but the state changes only a few times a rollout.
func (h *host) statusDoc() []byte {
	k := statusKey{booted: h.booted, staged: h.staged, rollback: h.rollback, queued: h.rollbackQueued}
	if h.staged != nil {
		k.downloadOnly = h.staged.downloadOnly
	}
	if h.status != nil && k == h.statusKey {
		return h.status
	}
	dk := docKey{booted: depKey(h.booted), staged: depKey(h.staged), rollback: depKey(h.rollback), downloadOnly: k.downloadOnly, queued: k.queued}
	if doc, ok := h.c.statusDocs[dk]; ok {
		h.status, h.statusKey = doc, k
		return doc
	}
	h.status = BootcStatusDoc(h.staged.doc(), h.booted.doc(), h.rollback.doc(), h.rollbackQueued)
	h.statusKey = k
	if h.c.statusDocs == nil {
		h.c.statusDocs = map[docKey][]byte{}
	}
	h.c.statusDocs[dk] = h.status
	return h.status
}

// docKey is what a status document shows, for the cluster's cache of
// them: the nodes of a rollout pass through the same few states.
type docKey struct {
	booted, staged, rollback [2]string
	downloadOnly, queued     bool
}

func depKey(d *deployment) [2]string {
	if d == nil {
		return [2]string{}
	}
	return [2]string{d.ref, d.im.Digest}
}

// BootcDeployment is what `bootc status` shows of a deployment.
type BootcDeployment struct {
	Ref, Digest  string
	DownloadOnly bool
}

// doc is d as BootcStatusDoc shows it; nil stays nil.
func (d *deployment) doc() *BootcDeployment {
	if d == nil {
		return nil
	}
	return &BootcDeployment{Ref: d.ref, Digest: d.im.Digest, DownloadOnly: d.downloadOnly}
}

// BootcStatusDoc is `bootc status --json --format-version 1` of a host in
// bootc's host-v1 schema: the simulated bootc of the twin and of host mode
// (sim/hostmode) print it. The spec image is the staged deployment's, else
// the booted one's; queued makes the boot order rollback.
func BootcStatusDoc(staged, booted, rollback *BootcDeployment, queued bool) []byte {
	spec, order := booted, "default"
	if staged != nil {
		spec = staged
	}
	if queued {
		order = "rollback"
	}
	return fmt.Appendf(nil, `{"apiVersion":%s,"kind":%s,"metadata":{"name":"host"},"spec":{"image":%s,"bootOrder":%q},"status":{"staged":%s,"booted":%s,"rollback":%s,"rollbackQueued":%t,"type":"bootcHost"}}`,
		jsonString(bootc.APIVersionV1), jsonString(bootc.KindBootcHost), imageRefJSON(spec), order,
		entryJSON(staged), entryJSON(booted), entryJSON(rollback), queued)
}

func imageRefJSON(d *BootcDeployment) string {
	if d == nil {
		return "null"
	}
	return `{"image":` + jsonString(d.Ref) + `,"transport":"registry"}`
}

func entryJSON(d *BootcDeployment) string {
	if d == nil {
		return "null"
	}
	checksum := strings.TrimPrefix(d.Digest, "sha256:")
	return fmt.Sprintf(`{"image":{"image":%s,"version":null,"timestamp":null,"imageDigest":%s,"architecture":"amd64"},"cachedUpdate":null,"incompatible":false,"pinned":false,"downloadOnly":%t,"store":"ostreeContainer","ostree":{"checksum":%s,"deploySerial":0,"stateroot":"default"}}`,
		imageRefJSON(d), jsonString(d.Digest), d.DownloadOnly, jsonString(checksum))
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
