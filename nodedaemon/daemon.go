package nodedaemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/backoff"
	"github.com/bootroll/bootroll/internal/imageref"
	"github.com/bootroll/bootroll/internal/readopts"
	"github.com/bootroll/bootroll/nodedaemon/cri"
	"github.com/bootroll/bootroll/nodedaemon/prefetch"
)

// DefaultResync is how often an idle daemon looks at its host when nothing
// else asks it to: it only catches changes made to the host out of band
// (every running stage, requested reboot, retry and wait for free space
// has a requeue of its own, and spec changes arrive as events). Each look
// runs `bootc status` on the host; at 2 minutes, as before issue 12, the
// looks were two thirds of a rollout's daemon reconciles.
const DefaultResync = 10 * time.Minute

// DefaultStagingReserve is the daemon's --staging-reserve default: the
// image-filesystem space pinned-image pulls leave free for the next OS
// image staging (8Gi, what staging a 4Gi OS image needs).
const DefaultStagingReserve int64 = 8 << 30

// FieldOwner is the field manager the daemon writes under, apart from the
// controller's, so managed fields show who wrote what.
const FieldOwner = v1alpha1.FieldManager + "-daemon"

// Host is the bootc host the daemon drives. Calls never overlap: the loop
// makes one at a time.
type Host interface {
	// Observe reports the host's deployments and boot ID, and whether a
	// stage runs (Staging) or how the last one ended (LastStage).
	Observe(ctx context.Context) (Observation, error)
	// Stage starts staging image, and may return before it ends. From the
	// call on, Observe reports Staging until it ends, then LastStage for
	// this call, never an earlier one. When Stage returns an error, that is
	// how the attempt ended: Observe reports it as LastStage.
	Stage(ctx context.Context, image string) error
	// Apply makes the staged image the next boot and reboots. It is called
	// again for the same image when a requested reboot did not happen.
	Apply(ctx context.Context, image string) error
	// Rollback queues the rollback deployment for the next boot.
	Rollback(ctx context.Context) error
	// Reboot reboots the host.
	Reboot(ctx context.Context) error
	// ShuttingDown reports whether the host is going down (a reboot or
	// power-off has begun). The loop asks only when its record names a
	// reboot asked for in the running boot that this process did not ask:
	// the process that recorded it may have stopped before asking.
	ShuttingDown(ctx context.Context) (bool, error)
}

// Daemon is the node daemon's loop for one node: it reconciles the node's
// own BootcNode by observing the host, calling Step and performing the
// actions in order. It spawns no goroutines and reads time only from its
// clock, so the twin drives the same Daemon with a simulated Host.
type Daemon struct {
	// Resync is the requeue when Step asks for none: the host can change
	// without an API event. 0 requeues only when Step asks.
	Resync time.Duration
	// Prefetch, when set, keeps the pinned images of spec.pinnedImageSets.
	Prefetch Prefetcher
	// StagingReserve is the image-filesystem space pinned-image pulls must
	// leave for the next OS image staging.
	StagingReserve int64
	// ControlPlane makes the prefetch pull one image at a time.
	ControlPlane bool
	// TestOnly breaks the daemon on purpose, for the twin's negative
	// controls; production leaves it zero.
	TestOnly TestOnly
	// NodeReader reads the daemon's own Node before a reboot (see
	// NodeFacts); nil reads it with the client. Production passes an
	// uncached reader (one GET, no cluster-wide Node informer).
	NodeReader client.Reader
	pinned     *pinnedReport
	// conditions is this process's last write of status.daemon.conditions.
	conditions *conditionsReport
	// runtimeFailures counts the prefetch passes in a row that found no
	// container runtime answering, for the retry's backoff.
	runtimeFailures int32

	nodeName string
	client   client.Client
	host     Host
	clock    clock.PassiveClock
	log      logr.Logger

	// reported is the status this process last wrote. The daemon is the
	// only writer of those fields, so it is newer than a lagging cache.
	reported *reported
	// rebootAsked is the boot ID on which this process asked the host to
	// reboot (Observation.RebootAsked).
	rebootAsked string
}

type reported struct {
	uid    types.UID
	status v1alpha1.BootcNodeStatus
}

// New returns the daemon for node nodeName. c reads and writes only the
// BootcNode of that name. Outside tests only Wire calls it, so that the
// daemon binary and the twin build their daemons the same way.
func New(nodeName string, c client.Client, host Host, clk clock.PassiveClock, log logr.Logger) *Daemon {
	return &Daemon{
		Resync:   DefaultResync,
		nodeName: nodeName,
		client:   c,
		host:     host,
		clock:    clk,
		log:      log,
	}
}

// fieldOwner is the option list of the daemon's status patches, passed
// as opts...: a variadic call allocated its one-element slice at every
// patch (as readopts.NoCopyGet spares the reads). No client changes the
// options it is given; nor may a caller change this one.
var fieldOwner = []client.SubResourcePatchOption{client.FieldOwner(FieldOwner)}

// Reconcile implements reconcile.Reconciler for the node's own BootcNode.
// Requests for other objects are ignored. When an action fails the rest are
// skipped and the error returned, so the workqueue retries with backoff.
func (d *Daemon) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.Name != d.nodeName {
		return reconcile.Result{}, nil
	}
	// Read without a deep copy: bn shares its maps, slices and pointers
	// with the cache, so the pass never modifies them. It only reads bn
	// (Step and the prefetch only read what they are given), sets fields
	// of its own struct, and its writes make bn the server's answer
	// without decoding into it (patchStatus). The copy was about 5% of
	// a twin run's CPU time.
	var bn v1alpha1.BootcNode
	if err := d.client.Get(ctx, client.ObjectKey{Name: d.nodeName}, &bn, readopts.NoCopyGet...); err != nil {
		if apierrors.IsNotFound(err) {
			d.reported = nil
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("get BootcNode %s: %w", d.nodeName, err)
	}
	if d.TestOnly.ForgetLastReboot {
		bn.Status.Daemon.LastReboot = nil
	}
	obs, err := d.host.Observe(ctx)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("observe host of node %s: %w", d.nodeName, err)
	}
	obs.Node = NodeFacts{} // the loop's part, not the host's
	obs.RebootAsked = d.rebootAsked != "" && d.rebootAsked == obs.BootID
	cur := d.current(&bn)
	if r := cur.Daemon.LastReboot; r != nil && !obs.RebootAsked && obs.BootID != "" && r.BootID == obs.BootID {
		// The record names a reboot asked for in this boot, by an earlier
		// process of this daemon: it may have stopped before it asked the
		// host, or after. The host tells which (explorer seed 115028 of
		// cluster-pool-deleted-mid-rollout: a daemon that recorded the
		// reboot and crashed before asking said for good that the node
		// was going down, and the node stayed Pending).
		down, err := d.host.ShuttingDown(ctx)
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("node %s: whether the host is going down, for the reboot recorded at %s in this boot: %w", d.nodeName, r.At.UTC().Format(time.RFC3339), err)
		}
		obs.RebootAsked, obs.RebootLost = down, !down
	}
	if !bn.DeletionTimestamp.IsZero() {
		// The node is leaving bootroll: start nothing on the host, but
		// acknowledge the record (a withdrawn boot order above all), so
		// the controller need not wait out healthTimeout to let it go.
		spec := bn.Spec
		spec.BootOrder = nil
		actions, _ := Step(d.clock.Now(), spec, bn.Generation, cur, obs)
		for _, a := range actions {
			if a.Type == ReportStatus {
				if err := d.perform(ctx, &bn, a); err != nil {
					return reconcile.Result{}, client.IgnoreNotFound(err)
				}
			}
		}
		return reconcile.Result{}, nil
	}
	if o := bn.Spec.Order(); o != nil && o.Rollback == holds(obs.Booted, imageref.Digest(bn.Spec.DesiredImage)) {
		// A reboot may be due: Step allows it only on a protected Node.
		if obs.Node, err = d.readNode(ctx); err != nil {
			return reconcile.Result{}, err
		}
	}
	actions, requeue := Step(d.clock.Now(), bn.Spec, bn.Generation, cur, obs)
	if d.Prefetch != nil && slices.ContainsFunc(actions, func(a Action) bool { return a.Type == Stage }) {
		// OS staging outranks pinned images: should something else have
		// taken the staging reserve, the prefetch gives it back first.
		if _, err := d.prefetch(ctx, &bn, true); err != nil {
			return reconcile.Result{}, err
		}
	}
	// Made only when there are actions and Info is logged (most passes
	// have none; logr.Discard or a higher verbosity drops them): the
	// key/value arguments, boxed into interfaces before Info could drop
	// them, were allocated for nothing at every action.
	var log logr.Logger
	logging := len(actions) > 0 && d.log.Enabled()
	if logging {
		log = d.log.WithValues("bootcnode", d.nodeName)
	}
	for i, a := range actions {
		if logging {
			if a.Status != nil {
				log.Info("performing action", "action", a.Type, "phase", a.Status.Daemon.Phase, "lastError", a.Status.Daemon.LastError)
			} else {
				log.Info("performing action", "action", a.String())
			}
		}
		if a.Type == Apply || a.Type == Reboot {
			d.rebootAsked = obs.BootID // asked from here on, even if the call fails part way
		}
		if err := d.perform(ctx, &bn, a); err != nil {
			return reconcile.Result{}, fmt.Errorf("node %s: %s (action %d of %d; the rest skipped): %w", d.nodeName, a, i+1, len(actions), err)
		}
	}
	if d.Prefetch != nil {
		wait, err := d.prefetch(ctx, &bn, false)
		if err != nil {
			return reconcile.Result{}, err
		}
		if wait > 0 && (requeue == 0 || wait < requeue) {
			requeue = wait
		}
	}
	if requeue == 0 {
		requeue = d.Resync
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// readNode reads the facts Step needs of the daemon's own Node, fresh from
// the API server; a Node not found gives the zero NodeFacts.
func (d *Daemon) readNode(ctx context.Context) (NodeFacts, error) {
	r := d.NodeReader
	if r == nil {
		r = d.client
	}
	var node corev1.Node
	if err := r.Get(ctx, client.ObjectKey{Name: d.nodeName}, &node); err != nil {
		if apierrors.IsNotFound(err) {
			return NodeFacts{}, nil
		}
		return NodeFacts{}, fmt.Errorf("get Node %s: %w", d.nodeName, err)
	}
	return NodeFactsOf(&node), nil
}

// Prefetcher keeps the node's pinned images (nodedaemon/prefetch): the
// production prefetch.Runner over the CRI image service, or the twin's
// host model running the same prefetch.Manager on virtual time. Sync only
// reads sets and current: the daemon hands it memory its cache shares.
type Prefetcher interface {
	Sync(ctx context.Context, now time.Time, sets []v1alpha1.NodePinnedImageSet, current []v1alpha1.PinnedSetProgress, env prefetch.Env) ([]v1alpha1.PinnedSetProgress, time.Duration, error)
}

// prefetch runs one prefetch pass and writes the progress when it changed.
// stagingDue says an OS staging is about to start (prefetch.Env.StagingDue).
func (d *Daemon) prefetch(ctx context.Context, bn *v1alpha1.BootcNode, stagingDue bool) (time.Duration, error) {
	current := bn.Status.Daemon.PinnedImages
	if d.pinned != nil && d.pinned.uid == bn.UID {
		current = d.pinned.progress // our own last write: newer than a lagging cache
	}
	progress, wait, err := d.Prefetch.Sync(ctx, d.clock.Now(), bn.Spec.PinnedImageSets, current, prefetch.Env{StagingReserve: d.StagingReserve, ControlPlane: d.ControlPlane, StagingDue: stagingDue, RecordCreated: bn.CreationTimestamp.Time})
	if err != nil && cri.Classify(err) == cri.KindRuntimeUnavailable {
		// No runtime answers: pinned images wait, OS updates do not.
		// Report it and look again after a backoff; the progress stays
		// as last written.
		d.runtimeFailures++
		retry := backoff.Nth(RuntimeRetryBase, RuntimeRetryMax, d.runtimeFailures)
		d.log.Info("container runtime unavailable: pinned images wait, OS updates go on", "bootcnode", d.nodeName, "error", err.Error(), "retryIn", retry)
		return retry, d.setAvailability(ctx, bn, err)
	}
	if err != nil {
		return 0, fmt.Errorf("node %s: prefetch pinned images: %w", d.nodeName, err)
	}
	if d.runtimeFailures > 0 {
		d.log.Info("container runtime answers again", "bootcnode", d.nodeName)
	}
	d.runtimeFailures = 0
	if err := d.setAvailability(ctx, bn, nil); err != nil {
		return 0, err
	}
	if prefetch.Equal(progress, current) {
		return wait, nil
	}
	data, err := prefetch.StatusPatch(progress)
	if err != nil {
		return 0, err
	}
	if err := d.patchStatus(ctx, bn, data); err != nil {
		return 0, fmt.Errorf("patch BootcNode %s pinned image progress: %w", d.nodeName, err)
	}
	d.pinned = &pinnedReport{uid: bn.UID, progress: progress}
	return wait, nil
}

type pinnedReport struct {
	uid      types.UID
	progress []v1alpha1.PinnedSetProgress
}

// The daemon's retry of a container runtime that does not answer: 10s,
// doubling up to 5m (the cri.Finder searching for it paces itself the
// same way).
const (
	RuntimeRetryBase = 10 * time.Second
	RuntimeRetryMax  = 5 * time.Minute
)

// setAvailability writes the PrefetchAvailable condition for the outcome
// err of a prefetch pass (nil: the runtime answered), when it changes.
func (d *Daemon) setAvailability(ctx context.Context, bn *v1alpha1.BootcNode, err error) error {
	current := bn.Status.Daemon.Conditions
	if d.conditions != nil && d.conditions.uid == bn.UID {
		current = d.conditions.conds // our own last write: newer than a lagging cache
	}
	conds, changed := prefetch.Availability(current, err, d.clock.Now(), bn.Generation)
	if !changed {
		return nil
	}
	data, perr := prefetch.ConditionsPatch(conds)
	if perr != nil {
		return perr
	}
	if perr := d.patchStatus(ctx, bn, data); perr != nil {
		return fmt.Errorf("patch BootcNode %s condition %s: %w", d.nodeName, prefetch.ConditionAvailable, perr)
	}
	d.conditions = &conditionsReport{uid: bn.UID, conds: conds}
	return nil
}

type conditionsReport struct {
	uid   types.UID
	conds []metav1.Condition
}

// current is the status last reported: this process's own last write when
// it made one for this object, else what the API returned. It shares
// memory with bn (and so with the cache) and with d.reported, uncopied:
// Step only reads its status (and copies what its report keeps), and
// d.reported is replaced by a copy on every report, never changed in
// place. Two deep copies per pass were 2% of an idle daemon pass.
func (d *Daemon) current(bn *v1alpha1.BootcNode) v1alpha1.BootcNodeStatus {
	s := bn.Status
	if r := d.reported; r != nil && r.uid == bn.UID {
		mine := r.status
		s.Booted, s.Staged, s.RollbackImage = mine.Booted, mine.Staged, mine.RollbackImage
		pinned, conds := s.Daemon.PinnedImages, s.Daemon.Conditions
		s.Daemon = mine.Daemon
		s.Daemon.PinnedImages, s.Daemon.Conditions = pinned, conds
	}
	return s
}

func (d *Daemon) perform(ctx context.Context, bn *v1alpha1.BootcNode, a Action) error {
	switch a.Type {
	case ReportStatus:
		data, err := StatusPatch(*a.Status)
		if err != nil {
			return err
		}
		if err := d.patchStatus(ctx, bn, data); err != nil {
			return fmt.Errorf("patch BootcNode %s status: %w", d.nodeName, err)
		}
		// a.Status is Step's copy, made for this action alone and only
		// read since: kept as it is, not copied again.
		d.reported = &reported{uid: bn.UID, status: *a.Status}
		return nil
	case Stage:
		return d.host.Stage(ctx, a.Image)
	case Apply:
		return d.host.Apply(ctx, a.Image)
	case Rollback:
		return d.host.Rollback(ctx)
	case Reboot:
		return d.host.Reboot(ctx)
	}
	return fmt.Errorf("unknown action type %q", a.Type)
}

// patchStatus writes the JSON merge patch data to the status of bn and
// makes bn the server's answer. The answer is decoded into an object of
// its own, never into bn: bn shares its maps, slices and pointers with the
// daemon's cache (Reconcile reads it with client.UnsafeDisableDeepCopy),
// and decoding reuses the maps and slices it finds. On an error bn is
// left as it was.
func (d *Daemon) patchStatus(ctx context.Context, bn *v1alpha1.BootcNode, data []byte) error {
	out := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: bn.Name, Namespace: bn.Namespace}}
	if err := d.client.Status().Patch(ctx, out, client.RawPatch(types.MergePatchType, data), fieldOwner...); err != nil {
		return err
	}
	*bn = *out
	return nil
}

// StatusPatch is the JSON merge patch that writes the daemon-owned status
// fields of s (booted, staged, rollbackImage, daemon without pinnedImages)
// and nothing else: never spec, status.phase or status.rollout. A merge
// patch merges objects key by key, so each object the daemon owns is sent
// with every key, null when empty, to replace the object rather than merge
// into the old one. Keys are in sorted order, as encoding/json writes a map,
// so the patch is byte-for-byte deterministic.
func StatusPatch(s v1alpha1.BootcNodeStatus) ([]byte, error) {
	// Written by hand, byte for byte what json.Marshal gives for the
	// document of statusPatchDoc (TestStatusPatchAsJSONMarshal): a
	// status report is one of the commonest writes.
	d := s.Daemon
	b := make([]byte, 0, 512)
	b = append(b, `{"status":{"booted":`...)
	b = appendHostImage(b, s.Booted)
	b = append(b, `,"daemon":{"bootID":`...)
	b = appendNonEmpty(b, d.BootID)
	b = append(b, `,"lastAttempt":`...)
	b = appendTimePtr(b, d.LastAttempt)
	b = append(b, `,"lastError":`...)
	b = appendNonEmpty(b, d.LastError)
	b = append(b, `,"lastReboot":`...)
	if r := d.LastReboot; r != nil {
		b = append(b, `{"at":`...)
		b = appendTime(b, r.At)
		b = append(b, `,"bootID":`...)
		b = appendString(b, r.BootID)
		b = append(b, `,"image":`...)
		b = appendString(b, r.Image)
		b = append(b, `,"orderAt":`...)
		b = appendTimePtr(b, r.OrderAt)
		b = append(b, `,"rollback":`...)
		if r.Rollback {
			b = append(b, "true"...)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"observedGeneration":`...)
	b = appendNonZero(b, d.ObservedGeneration)
	b = append(b, `,"phase":`...)
	b = appendNonEmpty(b, string(d.Phase))
	b = append(b, `,"stageAttempts":`...)
	b = appendNonZero(b, int64(d.StageAttempts))
	b = append(b, `},"rollbackImage":`...)
	b = appendHostImage(b, s.RollbackImage)
	b = append(b, `,"staged":`...)
	b = appendHostImage(b, s.Staged)
	return append(b, "}}"...), nil
}

// The parts of StatusPatch: every key present (no omitempty), in sorted
// order; what omitempty would leave out is sent as null.

func appendHostImage(b []byte, h *v1alpha1.HostImage) []byte {
	if h == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"digest":`...)
	b = appendNonEmpty(b, h.Digest)
	b = append(b, `,"image":`...)
	b = appendNonEmpty(b, h.Image)
	b = append(b, `,"timestamp":`...)
	b = appendTimePtr(b, h.Timestamp)
	b = append(b, `,"version":`...)
	b = appendNonEmpty(b, h.Version)
	return append(b, '}')
}

func appendNonEmpty(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendString(b, s)
}

func appendNonZero(b []byte, v int64) []byte {
	if v == 0 {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, v, 10)
}

func appendTimePtr(b []byte, t *metav1.Time) []byte {
	if t == nil {
		return append(b, "null"...)
	}
	return appendTime(b, *t)
}

// appendTime appends t as metav1.Time marshals itself (null when zero,
// else RFC 3339 in UTC, to the second).
func appendTime(b []byte, t metav1.Time) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339)
	return append(b, '"')
}

// appendString appends s quoted as encoding/json quotes it: printable
// ASCII without '"', '\\', '<', '>' and '&' is copied, anything else goes
// through json.Marshal.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// AsyncHost wraps a Host so that Stage runs in the background: Stage starts
// the wrapped Stage (in a goroutine, or through Go) and returns at once, and
// Observe reports Staging while it runs and its outcome as LastStage
// afterwards. Production wraps the bootc CLI in it; the twin wraps the same
// adapters over its simulated bootc and passes Go.
type AsyncHost struct {
	// Host is the wrapped, synchronous host.
	Host Host
	// Context bounds background stages (cancel it on shutdown); nil lets a
	// stage outlive the call that started it until it ends.
	Context context.Context
	// OnDone, when set, is called from the stage's goroutine after it ends,
	// so the loop can observe the outcome without waiting for a requeue. It
	// must not block.
	OnDone func()
	// Go, when set, starts stage in the background instead of a goroutine:
	// it must return before stage runs, and run it once, later, unless the
	// host goes down first. image is the image being staged. The twin
	// passes one that runs stage as an engine event at the end of the
	// simulated download, on virtual time; production leaves it nil.
	Go func(image string, stage func())

	st stager
}

var _ Host = (*AsyncHost)(nil)

// stager is AsyncHost's bookkeeping of the one background stage: whether
// it runs, how the last one ended, and the observation taken before it
// began.
type stager struct {
	mu      sync.Mutex
	running bool
	image   string
	last    *StageResult
	// before is the last observation of the wrapped host taken while no
	// stage ran. While one runs it stands in for a fresh one: bootc status
	// may wait on the sysroot lock that the running stage holds, and the
	// deployments do not change before the stage ends. It is held by
	// value (hasBefore: there is one), overwritten by each observation:
	// a pointer to a copy was an allocation at every daemon pass.
	before    Observation
	hasBefore bool
}

// Observe implements Host.
func (a *AsyncHost) Observe(ctx context.Context) (Observation, error) {
	a.st.mu.Lock()
	if a.st.running && a.st.hasBefore {
		obs := a.st.before
		a.st.mu.Unlock()
		obs.Staging, obs.LastStage = true, nil
		return obs, nil
	}
	a.st.mu.Unlock()

	obs, err := a.Host.Observe(ctx)
	if err != nil {
		return Observation{}, err
	}
	a.st.mu.Lock()
	defer a.st.mu.Unlock()
	if a.st.running {
		obs.Staging, obs.LastStage = true, nil
		return obs, nil
	}
	a.st.before, a.st.hasBefore = obs, true
	if a.st.last != nil {
		last := *a.st.last
		obs.LastStage = &last
	}
	return obs, nil
}

// Stage implements Host: it starts the wrapped Stage in the background.
// It fails only when a stage already runs, which Step never asks for.
func (a *AsyncHost) Stage(ctx context.Context, image string) error {
	a.st.mu.Lock()
	defer a.st.mu.Unlock()
	if a.st.running {
		return fmt.Errorf("stage %s: a stage of %s is already running", image, a.st.image)
	}
	a.st.running, a.st.image, a.st.last = true, image, nil
	base := a.Context
	if base == nil {
		base = context.WithoutCancel(ctx)
	}
	if a.Go != nil {
		a.Go(image, func() { a.run(base, image) })
		return nil
	}
	go a.run(base, image) // edge: long-running bootc download runs beside the loop
	return nil
}

func (a *AsyncHost) run(ctx context.Context, image string) {
	err := a.Host.Stage(ctx, image)
	r := &StageResult{Image: image}
	if err != nil {
		r.Err = err.Error()
	}
	a.st.mu.Lock()
	a.st.running, a.st.last, a.st.before, a.st.hasBefore = false, r, Observation{}, false
	a.st.mu.Unlock()
	if a.OnDone != nil {
		a.OnDone()
	}
}

// errStaging refuses host changes while a stage runs: they would race the
// stage for the sysroot.
var errStaging = errors.New("a stage is running")

// Apply implements Host.
func (a *AsyncHost) Apply(ctx context.Context, image string) error {
	if a.staging() {
		return fmt.Errorf("apply %s: %w", image, errStaging)
	}
	return a.Host.Apply(ctx, image)
}

// Rollback implements Host.
func (a *AsyncHost) Rollback(ctx context.Context) error {
	if a.staging() {
		return fmt.Errorf("rollback: %w", errStaging)
	}
	return a.Host.Rollback(ctx)
}

// Reboot implements Host.
func (a *AsyncHost) Reboot(ctx context.Context) error {
	return a.Host.Reboot(ctx)
}

// ShuttingDown implements Host.
func (a *AsyncHost) ShuttingDown(ctx context.Context) (bool, error) {
	return a.Host.ShuttingDown(ctx)
}

func (a *AsyncHost) staging() bool {
	a.st.mu.Lock()
	defer a.st.mu.Unlock()
	return a.st.running
}
