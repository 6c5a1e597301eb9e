// Package prefetch is the node daemon's prefetch manager: it pulls the
// images of the PinnedImageSets that apply to the node through the CRI
// image service and reports progress per image and per set.
//
// The decisions are in Manager.Step, a pure function of time, the sets,
// the progress last reported and an Observation of the image service; it
// returns Actions (start or cancel a pull), the progress to report and when
// to be called again. Runner is the production executor: it observes the
// image service, calls Step and runs pulls in goroutines. The twin builds
// the Observation from its host model, calls the same Step and runs pulls
// on virtual time.
//
// The rules, from DESIGN.md section 6:
//   - ImageStatus first: a present image is never pulled, so the registry
//     is never contacted for it, and a restarted daemon finds what it
//     pulled before.
//   - Before each pull, free space minus PullFactor times the image's
//     compressed size (minus what the pulls in flight may still take) must
//     stay at or above the set's minFreeAfterPull plus the OS staging
//     reserve: pinned images never take the room the next OS image needs.
//   - Bounded concurrency per set (one pull at a time on control-plane
//     nodes) and a throttle between the starts of a set's pulls.
//   - Transient failures are retried with capped exponential backoff, at
//     most MaxAttempts pulls; out-of-space fails at once and stops every
//     further pinned pull on the node.
//   - OS staging outranks pinned images: when a staging is due and
//     something else took the reserve (free space below it), present
//     pinned images are removed, the last in pull order first, and then
//     pulls in flight canceled, until the reserve is back; they are
//     pulled again when they fit with it.
//   - An image of unknown size is admitted on an estimate, so nothing
//     bounds what its pull takes: while a staging is due, such a pull is
//     canceled and none starts, so that the staging takes its room first
//     (the pull starts again afterwards, and fails alone if it does not
//     fit).
//   - bootroll's pins that no set lists are unpinned, except, on a record
//     younger than UnpinGrace, the pins of images its sets never listed:
//     a BootcNode made again (the node rejoined its pool, an admin
//     deleted the record) carries no sets until the PinnedImageSet
//     controller writes them, a moment later, so whether they will list
//     those images cannot be known yet. They are kept until the grace
//     ends, or until an OS staging is due and short of its reserve. An
//     image the record's sets listed and dropped is unpinned at once.
package prefetch

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/backoff"
	"github.com/bootroll/bootroll/nodedaemon/cri"
)

// The defaults of Config.
const (
	DefaultMaxAttempts   = 5
	DefaultBackoffBase   = 30 * time.Second
	DefaultBackoffMax    = 10 * time.Minute
	DefaultRearmAfter    = time.Hour
	DefaultEstimatedSize = int64(1 << 30)
	DefaultPullPoll      = 30 * time.Second
	DefaultSpacePoll     = 2 * time.Minute
	DefaultUnpinGrace    = 5 * time.Minute
	// MaxMessage bounds a progress message, so that 500 failed images keep
	// the BootcNode well below the API server's object size limit.
	MaxMessage = 512
)

// retrySoon is the least requeue, so that a wait that is due does not
// spin.
const retrySoon = time.Second

// Config holds the manager's knobs; zero fields take the defaults.
type Config struct {
	// MaxAttempts is how many pulls of an image start before a transient
	// failure makes it Failed. Default 5.
	MaxAttempts int32
	// BackoffBase is the wait after the first failed pull; it doubles with
	// each further failure up to BackoffMax. Defaults 30s and 10m (as the
	// daemon's stage backoff): five tries span about 7.5 minutes.
	BackoffBase, BackoffMax time.Duration
	// RearmAfter is how long an image that failed for a reason other than
	// space (not found, unauthorized, or MaxAttempts transient failures)
	// stays Failed before it gets MaxAttempts fresh tries. Default 1h;
	// negative: never (until its set changes). Out-of-space failures are
	// re-armed only by a change of the set.
	RearmAfter time.Duration
	// EstimatedSize is the compressed size assumed for an image whose size
	// is unknown (Observation.Images has no size for it: the executor could
	// not read its manifest). Default 1 GiB.
	EstimatedSize int64
	// PullPoll is the requeue while pulls run. The Runner also calls
	// OnDone when a pull ends; this bounds a missed wake-up. Default 30s.
	PullPoll time.Duration
	// SpacePoll is the requeue while a pull waits for free space: space
	// freed on the host brings no event, and the daemon's resync is only
	// a safety net. Default 2m.
	SpacePoll time.Duration
	// UnpinGrace is how long after its BootcNode was created
	// (Observation.RecordCreated) bootroll's pins of images that no set
	// of the record lists or listed (Observation.Reported) are kept
	// instead of unpinned: the sets of a record just made are written by
	// the PinnedImageSet controller after it, one set at a time, so until
	// then such a pin may be one a set will list again. Default 5m;
	// negative: none (unpin at once).
	UnpinGrace time.Duration
}

// Manager decides the prefetch of one node; build it with New. It holds
// only its Config: every decision comes from Step's arguments, so one
// Manager serves any number of calls, processes and (in the twin) nodes.
type Manager struct {
	cfg Config
}

// New returns a Manager with cfg's zero fields set to the defaults.
func New(cfg Config) *Manager {
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultBackoffBase
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = DefaultBackoffMax
	}
	if cfg.RearmAfter == 0 {
		cfg.RearmAfter = DefaultRearmAfter
	}
	if cfg.EstimatedSize <= 0 {
		cfg.EstimatedSize = DefaultEstimatedSize
	}
	if cfg.SpacePoll <= 0 {
		cfg.SpacePoll = DefaultSpacePoll
	}
	if cfg.PullPoll <= 0 {
		cfg.PullPoll = DefaultPullPoll
	}
	if cfg.UnpinGrace == 0 {
		cfg.UnpinGrace = DefaultUnpinGrace
	}
	return &Manager{cfg: cfg}
}

// Config returns the configuration in use, defaults filled in.
func (m *Manager) Config() Config { return m.cfg }

// Backoff is the wait after the given number of failed pulls of an image:
// 30s, 1m, 2m, 4m, ... capped at BackoffMax.
func (m *Manager) Backoff(failures int32) time.Duration {
	return backoff.Nth(m.cfg.BackoffBase, m.cfg.BackoffMax, failures)
}

// ImageInfo is what the image service says of one image.
type ImageInfo struct {
	// Present is ImageStatus's answer.
	Present bool
	// Size is the compressed size in bytes: the runtime's for a present
	// image, else from the registry manifest (or the twin's model); 0 is
	// unknown, and Config.EstimatedSize stands in.
	Size int64
	// Pinned is the runtime's report that the present image is pinned
	// (CRI ImageStatus pinned): the kubelet's image GC keeps it.
	Pinned bool
}

// Observation is what the executor saw of the image service just before
// Step.
type Observation struct {
	// Images holds ImageStatus (and the size) of every image of the sets,
	// by reference. An image missing is absent with unknown size. For
	// images being pulled the executor may skip ImageStatus (Present false)
	// but should give the size: it counts against free space.
	Images map[string]ImageInfo
	// Pulling maps each image whose pull runs to the attempt number of the
	// Pull action that started it.
	Pulling map[string]int32
	// Results are the pulls that ended since the last Step. Each result is
	// given to Step once: the executor drops the ones it passed.
	Results []PullResult
	// Fs is the image filesystem.
	Fs Space
	// StagingReserve is the free space the node keeps for staging its next
	// OS image (StagingNeed of its size) when that lands on the image
	// filesystem; 0 when staging uses another filesystem. The daemon keeps
	// it even while no update is pending (for example StagingNeed of the
	// booted image's size), so that pulls admitted now do not take the
	// room of an update that comes next.
	StagingReserve int64
	// ControlPlane is true on control-plane nodes: one pull at a time,
	// whatever the sets' concurrency.
	ControlPlane bool
	// StagingDue is true when the daemon is about to stage an OS image:
	// if free space is then below StagingReserve (something other than
	// the pinned pulls took it), Step removes present pinned images until
	// their sizes cover the shortfall.
	StagingDue bool
	// Pin says what the runtime allows: whether Step may ask to pin, the
	// images bootroll pinned, and why images stay unpinned.
	Pin PinObservation
	// RecordCreated is when the node's BootcNode (whose spec gives the
	// sets) was created, its creationTimestamp; zero when unknown. Until
	// Config.UnpinGrace after it, Step does not unpin bootroll's pins of
	// images that no set lists and Reported does not name.
	RecordCreated time.Time
	// Reported is the progress stored on that BootcNode (its
	// status.daemon.pinnedImages, or the daemon's own last write of it):
	// the images it names are images a set of that record listed, since
	// the daemon reports only the sets of its spec. A pin of such an
	// image that no set lists now was dropped by a set of this record,
	// and goes at once, whatever the record's age. Step only reads it.
	Reported []v1alpha1.PinnedSetProgress
}

// PinObservation is what the executor knows of pinning on the node.
type PinObservation struct {
	// Can is true when the executor can pin (containerd): Step asks to pin
	// every present image of the sets that the runtime does not report
	// pinned and bootroll has not pinned yet.
	Can bool
	// Own are the images bootroll pinned (its own record, the
	// bootroll.dev/pinned label), any set or none. Step unpins those no
	// set lists (see Config.UnpinGrace).
	Own []string
	// Note, when set, says why a present image may stay unpinned and what
	// to do (CRI-O pins by configuration; containerd before 1.7 ignores
	// the label). Step reports it as the Message of each present image
	// the runtime does not report pinned.
	Note string
}

// PullResult is how one pull ended.
type PullResult struct {
	Image string
	// Attempt is the Action's Attempt.
	Attempt int32
	// Kind is "" for success, else cri.Classify of the error.
	Kind cri.Kind
	// Message is the runtime's message (cri.Message).
	Message string
}

// ActionType names what an Action does.
type ActionType string

// The actions Step asks for.
const (
	// ActionPull starts pulling Action.Image. The executor reports it in
	// Observation.Pulling from then on, and its end in Results.
	ActionPull ActionType = "Pull"
	// ActionCancel cancels the running pull of Action.Image: no set lists
	// it any more, or its size is unknown and an OS staging is due.
	ActionCancel ActionType = "Cancel"
	// ActionRemove removes the present image Action.Image from the image
	// service, to give the OS staging reserve back (Observation.StagingDue).
	ActionRemove ActionType = "Remove"
	// ActionPin pins the present image Action.Image in the runtime and
	// records that bootroll pinned it (PinObservation.Can).
	ActionPin ActionType = "Pin"
	// ActionUnpin removes bootroll's pin of Action.Image: no set lists it
	// any more (see Config.UnpinGrace). A pin bootroll did not make
	// stays.
	ActionUnpin ActionType = "Unpin"
)

// Action is one thing Step asks the executor to do.
type Action struct {
	Type  ActionType
	Image string
	// Set is the set whose pull secret a Pull uses: the first set by name
	// that lists the image and has one, else the first that lists it.
	Set string
	// Attempt numbers a Pull (1 for the first); the result carries it back.
	Attempt int32
	// Size is the compressed size the space check assumed.
	Size int64
}

// String names the action for logs.
func (a Action) String() string {
	if a.Type == ActionPull {
		return fmt.Sprintf("%s %s (attempt %d, set %s, %s)", a.Type, a.Image, a.Attempt, a.Set, formatBytes(a.Size))
	}
	return string(a.Type) + " " + a.Image
}

// Step decides what to pull next on one node. sets are the node's pinned
// sets (BootcNode spec.pinnedImageSets), current the progress last
// reported (status.daemon.pinnedImages; after a restart, as read back).
// It returns the actions to perform in order, the progress to report, and
// when to be called again at the latest (0: only on change or resync).
//
// Step is pure and idempotent: with the progress it returned and the same
// observation it returns the same progress and no new pulls; the caller
// writes the progress only when it differs from the stored one.
//
// Images are taken in set-name order, then in each set's order; an image
// listed by several sets is pulled once and reported in each. Progress
// lists the sets sorted by name, each image in its set's order; sets and
// images no longer asked for are dropped.
func (m *Manager) Step(now time.Time, sets []v1alpha1.NodePinnedImageSet, current []v1alpha1.PinnedSetProgress, obs Observation) (actions []Action, progress []v1alpha1.PinnedSetProgress, requeue time.Duration) {
	if len(sets) == 0 && len(obs.Pulling) == 0 && len(obs.Pin.Own) == 0 {
		// Nothing to pull, cancel, pin or unpin (a node without pinned
		// sets, on every resync): no action, no progress, no requeue,
		// what the full step below finds (TestStepWithoutSets).
		return nil, nil, 0
	}
	return m.step(now, sets, current, obs)
}

func (m *Manager) step(now time.Time, sets []v1alpha1.NodePinnedImageSet, current []v1alpha1.PinnedSetProgress, obs Observation) (actions []Action, progress []v1alpha1.PinnedSetProgress, requeue time.Duration) {
	// The API server keeps times to the second; so does the progress, so
	// that a status read back compares equal to the one written.
	now = now.UTC().Truncate(time.Second)
	s := newStep(m, now, sets, current, obs)
	for _, ref := range s.wanted {
		s.observe(ref)
	}
	s.yieldToStaging()
	s.account()
	s.reclaim()
	for _, ref := range s.wanted {
		if !s.removed[ref] {
			s.consider(ref)
		}
	}
	for _, ref := range sortedKeys(obs.Pulling) {
		if _, ok := s.setsOf[ref]; !ok {
			s.actions = append(s.actions, Action{Type: ActionCancel, Image: ref})
		}
	}
	s.pin()
	if s.running > 0 {
		s.wait(m.cfg.PullPoll)
	}
	return s.actions, s.progress(), s.requeue
}

// InFlightNeed is the free space the pulls in obs.Pulling may still take:
// PullNeed of each one's size (EstimatedSize when unknown). It is
// conservative: the bytes they wrote already are also gone from
// obs.Fs.Available.
func (m *Manager) InFlightNeed(obs Observation) int64 {
	var n int64
	for ref := range obs.Pulling {
		n += PullNeed(m.size(obs, ref))
	}
	return n
}

func (m *Manager) size(obs Observation, ref string) int64 {
	if sz := obs.Images[ref].Size; sz > 0 {
		return sz
	}
	return m.cfg.EstimatedSize
}

// step is the working state of one Step call.
type step struct {
	m    *Manager
	cfg  Config
	now  time.Time
	obs  Observation
	sets []v1alpha1.NodePinnedImageSet
	// wanted lists the images of all sets once each, in pull order.
	wanted []string
	// setsOf gives the indexes in sets of the sets that list an image.
	setsOf map[string][]int
	recs   map[string]*v1alpha1.PinnedImageProgress
	// results by image, in attempt order.
	results map[string][]PullResult

	// stopped names an image that ran out of space: no pull starts.
	stopped string
	// removed are the images this Step removes (reclaim).
	removed map[string]bool
	// yielded are the running pulls of unknown size this Step cancels for
	// a staging that is due (yieldToStaging).
	yielded map[string]bool
	// running, inflightNeed and perSet count the pulls in flight.
	running      int
	inflightNeed int64
	perSet       []int
	// lastStart is the latest pull start of each set, for the throttle.
	lastStart []time.Time

	actions []Action
	requeue time.Duration
}

func newStep(m *Manager, now time.Time, sets []v1alpha1.NodePinnedImageSet, current []v1alpha1.PinnedSetProgress, obs Observation) *step {
	sets = slices.Clone(sets)
	slices.SortStableFunc(sets, func(a, b v1alpha1.NodePinnedImageSet) int { return cmp.Compare(a.Name, b.Name) })
	// The maps are made when something goes in: a node without pinned
	// sets (most nodes, every resync) allocates none.
	s := &step{
		m: m, cfg: m.cfg, now: now, obs: obs, sets: sets,
		perSet:    make([]int, len(sets)),
		lastStart: make([]time.Time, len(sets)),
	}
	for i, set := range sets {
		for _, ref := range set.Images {
			if s.setsOf == nil {
				s.setsOf = map[string][]int{}
			}
			idx := s.setsOf[ref]
			if len(idx) == 0 {
				s.wanted = append(s.wanted, ref)
			}
			if len(idx) == 0 || idx[len(idx)-1] != i {
				s.setsOf[ref] = append(idx, i)
			}
		}
	}

	// One record per image. When sets disagree (an image added to a set
	// after another set had it), the latest attempt wins.
	cur := slices.Clone(current)
	slices.SortStableFunc(cur, func(a, b v1alpha1.PinnedSetProgress) int { return cmp.Compare(a.Name, b.Name) })
	var gen map[string]int64
	for _, sp := range cur {
		if gen == nil {
			gen = map[string]int64{}
		}
		gen[sp.Name] = sp.Generation
		for i := range sp.Images {
			e := &sp.Images[i]
			if _, ok := s.setsOf[e.Image]; !ok {
				continue
			}
			if old, ok := s.recs[e.Image]; ok && !later(e.LastAttempt, old.LastAttempt) {
				continue
			}
			if s.recs == nil {
				s.recs = map[string]*v1alpha1.PinnedImageProgress{}
			}
			s.recs[e.Image] = e.DeepCopy()
		}
	}
	for _, ref := range s.wanted {
		if s.recs[ref] == nil {
			if s.recs == nil {
				s.recs = map[string]*v1alpha1.PinnedImageProgress{}
			}
			s.recs[ref] = &v1alpha1.PinnedImageProgress{Image: ref, State: v1alpha1.PinnedPending}
		}
	}
	// A changed set is the user acting: its failed images start afresh.
	for _, set := range sets {
		if g, ok := gen[set.Name]; ok && g != set.Generation {
			for _, ref := range set.Images {
				if r := s.recs[ref]; r.State == v1alpha1.PinnedFailed {
					reset(r)
				}
			}
		}
	}

	res := slices.Clone(obs.Results)
	slices.SortStableFunc(res, func(a, b PullResult) int {
		return cmp.Or(cmp.Compare(a.Image, b.Image), cmp.Compare(a.Attempt, b.Attempt))
	})
	for _, r := range res {
		if s.results == nil {
			s.results = map[string][]PullResult{}
		}
		s.results[r.Image] = append(s.results[r.Image], r)
	}
	return s
}

// sortedKeys is slices.Sorted(maps.Keys(m)), without the iterator when m
// is empty (nil then).
func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(m))
}

// later reports whether a is after b (nil is before everything).
func later(a, b *metav1.Time) bool {
	switch {
	case a == nil:
		return false
	case b == nil:
		return true
	}
	return a.After(b.Time)
}

// reset makes r a fresh Pending image; LastAttempt stays for the throttle.
func reset(r *v1alpha1.PinnedImageProgress) {
	*r = v1alpha1.PinnedImageProgress{Image: r.Image, State: v1alpha1.PinnedPending, LastAttempt: r.LastAttempt}
}

// observe folds the image service's view of ref into its record: finished
// pulls, presence, running pulls, lost pulls and re-armed failures.
func (s *step) observe(ref string) {
	r := s.recs[ref]
	info := s.obs.Images[ref]
	attempt, pulling := s.obs.Pulling[ref]
	if !info.Present {
		for _, res := range s.results[ref] {
			if pulling && attempt > res.Attempt {
				continue // a newer attempt runs
			}
			// The attempt the record announced, or a newer one than a
			// stale record knows. A result applied once finds the record
			// no longer Pulling and is not counted again.
			if (r.State == v1alpha1.PinnedPulling && r.Attempts <= res.Attempt) || r.Attempts < res.Attempt {
				s.apply(r, res)
			}
		}
	}
	switch {
	case info.Present:
		r.State, r.Reason, r.Message, r.RetryAfter = v1alpha1.PinnedPresent, "", "", nil
	case pulling:
		if r.State != v1alpha1.PinnedPulling || r.Attempts != attempt {
			// Started by this executor under a record this Step was not
			// given (a lagging read): adopt it.
			r.State, r.Attempts, r.Reason, r.Message, r.RetryAfter = v1alpha1.PinnedPulling, attempt, "", "", nil
			if r.LastAttempt == nil {
				r.LastAttempt = s.time(s.now)
			}
		}
	case r.State == v1alpha1.PinnedPresent:
		// Gone (the kubelet's image GC, or a person): pull it again.
		reset(r)
	case r.State == v1alpha1.PinnedPulling:
		// Announced, not running, not finished: the process that ran it
		// stopped. Start it again without counting the lost attempt.
		r.State, r.Attempts, r.RetryAfter = v1alpha1.PinnedPending, max(r.Attempts-1, 0), nil
		r.Reason, r.Message = "", ""
	case r.State == v1alpha1.PinnedFailed && rearmable(r.Reason) && r.RetryAfter != nil && !s.now.Before(r.RetryAfter.Time):
		reset(r)
	}
}

// rearmable reports whether a failure of this reason gets fresh tries
// after RearmAfter. Out of space waits for a change of the set; too little
// space is checked again at every Step, at least every SpacePoll.
func rearmable(reason string) bool {
	return reason != v1alpha1.PinnedReasonOutOfSpace && reason != v1alpha1.PinnedReasonInsufficientSpace
}

// apply records how a pull ended.
func (s *step) apply(r *v1alpha1.PinnedImageProgress, res PullResult) {
	kind, msg := res.Kind, res.Message
	switch kind {
	case "":
		kind, msg = cri.KindUnknown, "the pull reported success but ImageStatus does not find the image"
	case cri.KindCanceled:
		// Canceled by the executor (shutdown, or the image left every set
		// and came back): not a failure of the image.
		r.State, r.Attempts, r.Reason, r.Message, r.RetryAfter = v1alpha1.PinnedPending, max(res.Attempt-1, 0), "", "", nil
		return
	}
	r.Attempts = max(r.Attempts, res.Attempt)
	r.Reason, r.Message, r.RetryAfter = string(kind), shorten(msg, r.Image), nil
	switch {
	case kind == cri.KindOutOfSpace:
		r.State = v1alpha1.PinnedFailed
	case !kind.Transient():
		r.State, r.RetryAfter = v1alpha1.PinnedFailed, s.rearm()
	case r.Attempts >= s.cfg.MaxAttempts:
		r.State, r.RetryAfter = v1alpha1.PinnedFailed, s.rearm()
		r.Message = shorten(fmt.Sprintf("gave up after %d attempts: %s", r.Attempts, r.Message), r.Image)
	default:
		r.State, r.RetryAfter = v1alpha1.PinnedPending, s.time(s.now.Add(s.m.Backoff(r.Attempts)))
	}
}

func (s *step) rearm() *metav1.Time {
	if s.cfg.RearmAfter < 0 {
		return nil
	}
	return s.time(s.now.Add(s.cfg.RearmAfter))
}

func (s *step) time(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}

// yieldToStaging cancels, while an OS staging is due, the running pulls of
// images whose size is unknown. Such a pull was admitted on
// Config.EstimatedSize: it may take far more than the estimate, up to all
// the free space (containerd writes until the filesystem is full), and so
// the staging reserve, which reclaim cannot give back since the image is
// not present. The record goes back to Pending without counting the
// attempt, as a pull canceled by the executor does; consider starts it
// again once no staging is due, when the staging holds its room.
func (s *step) yieldToStaging() {
	if !s.obs.StagingDue {
		return
	}
	for _, ref := range sortedKeys(s.obs.Pulling) {
		if _, wanted := s.setsOf[ref]; !wanted || s.obs.Images[ref].Size > 0 {
			continue
		}
		r := s.recs[ref]
		r.State, r.Attempts, r.RetryAfter = v1alpha1.PinnedPending, max(s.obs.Pulling[ref]-1, 0), nil
		r.Reason, r.Message = "", ""
		if s.yielded == nil {
			s.yielded = map[string]bool{}
		}
		s.yielded[ref] = true
		s.actions = append(s.actions, Action{Type: ActionCancel, Image: ref})
	}
}

// account counts the pulls in flight, finds whether the node is stopped by
// an out-of-space failure, and the last start of each set.
func (s *step) account() {
	for _, ref := range sortedKeys(s.obs.Pulling) {
		if s.yielded[ref] {
			continue
		}
		s.running++
		s.inflightNeed += PullNeed(s.m.size(s.obs, ref))
		for _, i := range s.setsOf[ref] {
			s.perSet[i]++
		}
	}
	for _, ref := range s.wanted {
		r := s.recs[ref]
		if s.stopped == "" && r.State == v1alpha1.PinnedFailed && r.Reason == v1alpha1.PinnedReasonOutOfSpace {
			s.stopped = ref
		}
		if r.LastAttempt != nil {
			for _, i := range s.setsOf[ref] {
				if r.LastAttempt.After(s.lastStart[i]) {
					s.lastStart[i] = r.LastAttempt.Time
				}
			}
		}
	}
}

// reclaim removes present pinned images, the last in pull order first,
// and then cancels pulls in flight, while an OS staging is due and free
// space is below the staging reserve:
// the pulls left the reserve free, so something else took it, and the OS
// update outranks the pinned images. The sizes are the images' compressed
// sizes; a removal frees less when layers are shared, and the executor
// steps again until no removal is asked. A removed image is
// InsufficientSpace, so it is pulled again only when it fits with the
// reserve.
//
// A Step that cancels pulls of unknown size (yieldToStaging) removes
// nothing: their bytes, unknown, are part of the shortfall and come back
// as they end; should the reserve still be short, the staging's next
// attempt finds it so and reclaims then.
func (s *step) reclaim() {
	short := s.obs.StagingReserve - s.obs.Fs.Available
	if !s.obs.StagingDue || short <= 0 || len(s.yielded) > 0 {
		return
	}
	for i := len(s.wanted) - 1; i >= 0 && short > 0; i-- {
		ref := s.wanted[i]
		r := s.recs[ref]
		if r.State != v1alpha1.PinnedPresent {
			continue
		}
		size := s.m.size(s.obs, ref)
		short -= size
		s.giveBack(ref, "removed")
		s.actions = append(s.actions, Action{Type: ActionRemove, Image: ref, Size: size})
	}
	// Still short: the pulls in flight hold room too (PullNeed of their
	// size), and are canceled, the last in pull order first, as an
	// image that is present would be removed; such a pull is not counted
	// as an attempt (explorer seed 119053 of pinned-set-changed-mid-pull:
	// a disk filled by someone else, the present images removed, and the
	// staging failed for room that two pulls in flight held).
	for i := len(s.wanted) - 1; i >= 0 && short > 0; i-- {
		ref := s.wanted[i]
		size := s.obs.Images[ref].Size
		if s.obs.Pulling[ref] == 0 || size <= 0 || s.removed[ref] {
			continue
		}
		short -= PullNeed(size)
		s.giveBack(ref, "pull canceled").Attempts = max(s.obs.Pulling[ref]-1, 0)
		s.actions = append(s.actions, Action{Type: ActionCancel, Image: ref})
	}
}

// giveBack records ref as given up for the OS staging's reserve (what:
// "removed", "pull canceled"): InsufficientSpace, so that it is pulled
// again only when it fits with the reserve, and looked at again after
// SpacePoll (no event says when space is freed). It returns the record.
func (s *step) giveBack(ref, what string) *v1alpha1.PinnedImageProgress {
	if s.removed == nil {
		s.removed = map[string]bool{}
	}
	s.removed[ref] = true
	r := s.recs[ref]
	r.State, r.Reason, r.RetryAfter = v1alpha1.PinnedFailed, v1alpha1.PinnedReasonInsufficientSpace, nil
	s.wait(s.m.cfg.SpacePoll)
	r.Message = fmt.Sprintf("%s to give OS staging its reserve (%s) back: the image filesystem had %s of %s available",
		what, formatBytes(s.obs.StagingReserve), formatBytes(s.obs.Fs.Available), formatBytes(s.obs.Fs.Capacity))
	return r
}

// consider starts a pull of ref when it is due, fits and has a slot.
func (s *step) consider(ref string) {
	r := s.recs[ref]
	switch {
	case r.State == v1alpha1.PinnedPresent || r.State == v1alpha1.PinnedPulling:
		return
	case r.State == v1alpha1.PinnedFailed && r.Reason != v1alpha1.PinnedReasonInsufficientSpace:
		if r.RetryAfter != nil {
			s.wait(r.RetryAfter.Sub(s.now))
		}
		return
	}
	if s.stopped != "" {
		if r.State == v1alpha1.PinnedPending {
			r.Reason = v1alpha1.PinnedReasonBlocked
			r.Message = shorten("not started: "+s.stopped+" ran out of space on this node; no pinned image is pulled until its set changes or drops it", "")
			r.RetryAfter = nil
		}
		return
	}
	if r.RetryAfter != nil && s.now.Before(r.RetryAfter.Time) {
		s.wait(r.RetryAfter.Sub(s.now))
		return
	}
	if r.Reason == v1alpha1.PinnedReasonBlocked {
		r.Reason, r.Message = "", ""
	}

	if s.obs.StagingDue && s.obs.Images[ref].Size <= 0 {
		// Its size is unknown: it could take the room the staging that is
		// about to start needs (see yieldToStaging). It starts once the
		// staging holds that room.
		return
	}
	size := s.m.size(s.obs, ref)
	need := PullNeed(size)
	floor, minFree := s.floor(ref)
	if s.obs.Fs.Available-need < floor {
		estimated := ""
		if s.obs.Images[ref].Size <= 0 {
			estimated = ", estimated"
		}
		r.State, r.Reason, r.RetryAfter = v1alpha1.PinnedFailed, v1alpha1.PinnedReasonInsufficientSpace, nil
		s.wait(s.m.cfg.SpacePoll) // no event says when space is freed
		r.Message = fmt.Sprintf("not pulled: a pull needs about %s free (%d x %s compressed%s) and must leave %s (minFreeAfterPull) + %s (OS staging reserve); the image filesystem has %s of %s available",
			formatBytes(need), PullFactor, formatBytes(size), estimated, formatBytes(minFree), formatBytes(s.obs.StagingReserve),
			formatBytes(s.obs.Fs.Available), formatBytes(s.obs.Fs.Capacity))
		return
	}
	if r.State == v1alpha1.PinnedFailed {
		r.State, r.Reason, r.Message = v1alpha1.PinnedPending, "", ""
	}
	if s.obs.Fs.Available-s.inflightNeed-need < floor {
		return // fits once the pulls in flight end: wait for them
	}
	if !s.slot(ref) {
		return
	}
	if w := s.throttle(ref); w > 0 {
		s.wait(w)
		return
	}

	r.State, r.Reason, r.Message, r.RetryAfter = v1alpha1.PinnedPulling, "", "", nil
	r.Attempts++
	r.LastAttempt = s.time(s.now)
	s.running++
	s.inflightNeed += need
	for _, i := range s.setsOf[ref] {
		s.perSet[i]++
		s.lastStart[i] = s.now
	}
	s.actions = append(s.actions, Action{Type: ActionPull, Image: ref, Set: s.credentialSet(ref), Attempt: r.Attempts, Size: size})
}

// pin reports whether each present image is pinned, asks to pin those
// the runtime does not report pinned (once: bootroll's record says it
// did), and to unpin bootroll's pins that no set lists, unless the
// record is too young to tell whether its sets will (unpinHold).
func (s *step) pin() {
	var own map[string]bool
	for _, ref := range s.obs.Pin.Own {
		if own == nil {
			own = map[string]bool{}
		}
		own[ref] = true
	}
	for _, ref := range s.wanted {
		r := s.recs[ref]
		r.Pinned = false
		if r.State != v1alpha1.PinnedPresent {
			continue
		}
		if s.obs.Images[ref].Pinned {
			r.Pinned = true
			continue
		}
		if s.obs.Pin.Can && !own[ref] {
			s.actions = append(s.actions, Action{Type: ActionPin, Image: ref})
		}
		if s.obs.Pin.Note != "" {
			r.Message = s.obs.Pin.Note
		}
	}
	var hold time.Time
	asked := false
	for _, ref := range sortedKeys(own) {
		if _, ok := s.setsOf[ref]; ok {
			continue
		}
		if !asked {
			asked = true
			hold = s.unpinHold()
		}
		if !hold.IsZero() && !names(s.obs.Reported, ref) {
			s.wait(hold.Sub(s.now)) // unpinned then, if no set lists it
			continue
		}
		s.actions = append(s.actions, Action{Type: ActionUnpin, Image: ref})
	}
}

// unpinHold is when the pins of images that no set of the record lists
// or listed may go: the end of the record's UnpinGrace, or the zero time
// when they may go now. A record made again (its node rejoined its pool,
// or an admin deleted it) starts with no sets in its spec; the
// PinnedImageSet controller writes them a moment later, set by set, and
// nothing on the record says when it has written them all (a node no set
// selects gets none). Unpinning in that moment hands the images to the
// kubelet's image GC, which may remove them under disk pressure before
// they are pinned again. The grace ends early when an OS staging is due
// and short of its reserve: such pins then go at once, as they did
// before the grace, and are no longer what bootroll holds.
func (s *step) unpinHold() time.Time {
	if s.cfg.UnpinGrace <= 0 || s.obs.RecordCreated.IsZero() {
		return time.Time{}
	}
	until := s.obs.RecordCreated.UTC().Truncate(time.Second).Add(s.cfg.UnpinGrace)
	if !s.now.Before(until) || (s.obs.StagingDue && s.obs.Fs.Available < s.obs.StagingReserve) {
		return time.Time{}
	}
	return until
}

// names reports whether progress names the image ref.
func names(progress []v1alpha1.PinnedSetProgress, ref string) bool {
	for _, sp := range progress {
		for _, e := range sp.Images {
			if e.Image == ref {
				return true
			}
		}
	}
	return false
}

// floor is the free space a pull of ref must leave: the strictest
// minFreeAfterPull of the sets that list it, plus the staging reserve.
func (s *step) floor(ref string) (floor, minFree int64) {
	for _, i := range s.setsOf[ref] {
		minFree = max(minFree, MinFreeBytes(s.sets[i].MinFreeAfterPull, s.obs.Fs.Capacity))
	}
	return minFree + s.obs.StagingReserve, minFree
}

// slot reports whether one more pull of ref keeps within the concurrency
// of every set that lists it, and of the node on control-plane nodes.
func (s *step) slot(ref string) bool {
	if s.obs.ControlPlane && s.running >= v1alpha1.ControlPlanePinConcurrency {
		return false
	}
	for _, i := range s.setsOf[ref] {
		c := int(s.sets[i].Concurrency)
		if c <= 0 {
			c = v1alpha1.DefaultPinConcurrency
		}
		if s.perSet[i] >= c {
			return false
		}
	}
	return true
}

// throttle is how long ref must wait for the throttle of its sets.
func (s *step) throttle(ref string) time.Duration {
	var w time.Duration
	for _, i := range s.setsOf[ref] {
		t := s.sets[i].Throttle
		if t == nil || t.Duration <= 0 || s.lastStart[i].IsZero() {
			continue
		}
		w = max(w, s.lastStart[i].Add(t.Duration).Sub(s.now))
	}
	return w
}

// credentialSet is the set whose pull secret a pull of ref uses.
func (s *step) credentialSet(ref string) string {
	idx := s.setsOf[ref]
	for _, i := range idx {
		if s.sets[i].PullSecret != nil {
			return s.sets[i].Name
		}
	}
	return s.sets[idx[0]].Name
}

// wait lowers the requeue to d (at least retrySoon).
func (s *step) wait(d time.Duration) {
	d = max(d, retrySoon)
	if s.requeue == 0 || d < s.requeue {
		s.requeue = d
	}
}

func (s *step) progress() []v1alpha1.PinnedSetProgress {
	if len(s.sets) == 0 {
		return nil
	}
	out := make([]v1alpha1.PinnedSetProgress, 0, len(s.sets))
	for _, set := range s.sets {
		sp := v1alpha1.PinnedSetProgress{Name: set.Name, Generation: set.Generation}
		for _, ref := range set.Images {
			e := *s.recs[ref].DeepCopy()
			switch e.State {
			case v1alpha1.PinnedPresent:
				sp.Present++
			case v1alpha1.PinnedPulling:
				sp.Pulling++
			case v1alpha1.PinnedFailed:
				sp.Failed++
			default:
				sp.Pending++
			}
			sp.Images = append(sp.Images, e)
		}
		out = append(out, sp)
	}
	return out
}

// shorten drops the runtime's `failed to pull and unpack image "<ref>": `
// (the entry names the image) and keeps at most MaxMessage bytes, from the
// end: containerd puts the cause last.
func shorten(msg, ref string) string {
	if ref != "" {
		msg = strings.TrimPrefix(msg, `failed to pull and unpack image "`+ref+`": `)
	}
	if len(msg) <= MaxMessage {
		return msg
	}
	const ellipsis = "…"
	cut := len(msg) - (MaxMessage - len(ellipsis))
	for cut < len(msg) && !utf8.RuneStart(msg[cut]) {
		cut++
	}
	return ellipsis + msg[cut:]
}
