package prefetch

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/nodedaemon/cri"
)

// ImageService is the runtime's image service as the Runner uses it.
// CRIImages implements it over a cri.Client.
type ImageService interface {
	// ImageStatus reports whether ref is present and its compressed size.
	// It must not contact the registry.
	ImageStatus(ctx context.Context, ref string) (present bool, size int64, err error)
	// Pull pulls ref with auth (nil: anonymous) and returns when it ends.
	Pull(ctx context.Context, ref string, auth *cri.Auth) error
	// FsInfo reports the image filesystem's size and free bytes.
	FsInfo(ctx context.Context) (capacity, available int64, err error)
	// RemoveImage removes ref; removing an absent image succeeds.
	RemoveImage(ctx context.Context, ref string) error
}

// Pinner pins images in the runtime so that the kubelet's image garbage
// collection keeps them. An ImageService that also implements Pinner pins
// the images of the sets; CRIImages does (containerd's pinned label), the
// twin's image service does, and one that does not leaves every image
// unpinned and reported so.
type Pinner interface {
	// PinState tells whether pinning is possible (can), why a present
	// image may stay unpinned and what to do (note; "" when pins work),
	// and the images bootroll pinned (own), whatever set listed them.
	PinState(ctx context.Context) (can bool, note string, own []string, err error)
	// Pinned reports whether the runtime reports the present image ref
	// pinned (CRI ImageStatus pinned).
	Pinned(ctx context.Context, ref string) (bool, error)
	// Pin pins the present image ref and records that bootroll did.
	Pin(ctx context.Context, ref string) error
	// Unpin removes bootroll's pin of ref; a pin bootroll did not make,
	// and an absent image, are left alone.
	Unpin(ctx context.Context, ref string) error
}

// Sizer tells an absent image's compressed size, from its manifest in the
// registry. RegistrySizer implements it.
type Sizer interface {
	Size(ctx context.Context, ref string, auth *cri.Auth) (int64, error)
}

// Credentials returns the credentials for pulling ref as set asks (nil:
// anonymous). The daemon reads set.PullSecret and calls cri.AuthForSecret.
type Credentials func(ctx context.Context, set v1alpha1.NodePinnedImageSet, ref string) (*cri.Auth, error)

// Env is what the daemon tells the Runner about the node at each Sync.
type Env struct {
	// StagingReserve is Observation.StagingReserve.
	StagingReserve int64
	// ControlPlane is Observation.ControlPlane.
	ControlPlane bool
	// StagingDue is Observation.StagingDue.
	StagingDue bool
	// RecordCreated is Observation.RecordCreated: the creationTimestamp
	// of the BootcNode whose sets the Sync is given.
	RecordCreated time.Time
}

// Defaults of the Runner.
const (
	// DefaultPullTimeout bounds one pull.
	DefaultPullTimeout = 30 * time.Minute
	// sizeTimeout bounds one manifest lookup.
	sizeTimeout = 15 * time.Second
	// maxSizeLookups bounds the manifest lookups of one Sync, so that a
	// set of 500 new images does not hold the daemon loop.
	maxSizeLookups = 8
	// sizeRetry is how long a failed manifest lookup is not repeated.
	sizeRetry = time.Minute
)

// Runner is the production executor of the prefetch manager: at each Sync
// it observes the image service, calls Manager.Step and starts the pulls
// it asks for, each in a goroutine of its own (Step bounds how many run).
// The daemon calls Sync from its loop, one call at a time, and writes the
// progress it returns when it differs from the stored one.
type Runner struct {
	// Manager decides; nil means New(Config{}).
	Manager *Manager
	// Images is the runtime.
	Images ImageService
	// Sizes, when set, looks up the size of absent images in the registry
	// (never of present ones). Sizes are cached by reference: a digest
	// reference names immutable content. Without it, or when a lookup
	// fails, Step assumes Config.EstimatedSize.
	Sizes Sizer
	// Credentials, when set, gives each pull (and size lookup) its
	// credentials; nil pulls anonymously.
	Credentials Credentials
	// Context bounds the pulls (cancel it on shutdown); nil: Background.
	Context context.Context
	// PullTimeout bounds one pull; 0 means DefaultPullTimeout.
	PullTimeout time.Duration
	// OnDone, when set, is called from a pull's goroutine when it ends, so
	// the daemon can Sync without waiting for its requeue. It must not
	// block.
	OnDone func()
	// Go, when set, runs a pull in the background instead of a goroutine,
	// as nodedaemon.AsyncHost.Go runs a stage: a is the Step's action that
	// starts it. Go must return before pull runs, and run pull once, later,
	// unless the process ends first. No goroutine then waits on the pull's
	// context, so canceling the pull also calls the stop that Go returned,
	// which must run pull (now or soon); pull then finds its context
	// canceled. The twin passes one that runs pull as an engine event at
	// the end of the simulated download, on virtual time; production
	// leaves it nil.
	Go func(a Action, pull func()) (stop func())

	syncMu  sync.Mutex
	mu      sync.Mutex
	pulls   map[string]*pull
	results []PullResult
	sizes   map[string]int64
	// sizeFailed is when a lookup of each image last failed.
	sizeFailed map[string]time.Time
	// last is the progress the last Step returned: the Runner is the only
	// writer of it, so it is newer than a lagging read of the API.
	last     []v1alpha1.PinnedSetProgress
	haveLast bool
	wg       sync.WaitGroup
}

type pull struct {
	attempt int32
	cancel  context.CancelFunc
}

// Sync observes the image service, decides with Step and starts or
// cancels pulls. current is the stored progress of the BootcNode whose
// sets are given (its status, or the daemon's last write of it); after
// its first Sync the Runner uses the progress it returned last instead,
// since the daemon's read of its BootcNode may lag its own writes. current
// still tells Step which images that record's sets listed
// (Observation.Reported): the progress the Runner returned last may be an
// earlier record's. It returns the progress to report and the requeue (0:
// none needed). An error (the runtime did not answer) leaves everything as
// it was.
//
// When Step removes images (Env.StagingDue), Sync observes and steps again,
// at most ReclaimRounds times, until Step removes no more: a removal frees
// less than the image's size when it shares layers.
func (r *Runner) Sync(ctx context.Context, now time.Time, sets []v1alpha1.NodePinnedImageSet, current []v1alpha1.PinnedSetProgress, env Env) ([]v1alpha1.PinnedSetProgress, time.Duration, error) {
	// One Sync at a time: each consumes the results the previous left.
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	for round := 1; ; round++ {
		// A round that pins or unpins steps again, so that the progress
		// reported says what the runtime made of it.
		progress, requeue, again, err := r.syncOnce(ctx, now, sets, current, env)
		if err != nil || !again || round >= ReclaimRounds {
			return progress, requeue, err
		}
	}
}

// ReclaimRounds bounds the observe-and-step rounds of one Sync that removes
// images to give OS staging its reserve back, or pins.
const ReclaimRounds = 8

func (r *Runner) syncOnce(ctx context.Context, now time.Time, sets []v1alpha1.NodePinnedImageSet, current []v1alpha1.PinnedSetProgress, env Env) (progress []v1alpha1.PinnedSetProgress, requeue time.Duration, again bool, err error) {
	stored := current // the record's own report (Observation.Reported)
	r.mu.Lock()
	r.init()
	var pulling map[string]int32 // nil when no pull runs: only read
	if len(r.pulls) > 0 {
		pulling = make(map[string]int32, len(r.pulls))
	}
	for ref, p := range r.pulls {
		pulling[ref] = p.attempt
	}
	results := slices.Clone(r.results)
	if r.haveLast {
		current = r.last
	}
	r.mu.Unlock()

	capacity, available, err := r.Images.FsInfo(ctx)
	if err != nil {
		return nil, 0, false, fmt.Errorf("prefetch: image filesystem: %w", err)
	}
	refs := imagesOf(sets)
	obs := Observation{
		Pulling:        pulling,
		Results:        results,
		Fs:             Space{Capacity: capacity, Available: available},
		StagingReserve: env.StagingReserve,
		ControlPlane:   env.ControlPlane,
		StagingDue:     env.StagingDue,
		RecordCreated:  env.RecordCreated,
		Reported:       stored,
	}
	pinner, _ := r.Images.(Pinner)
	if pinner != nil {
		can, note, own, err := pinner.PinState(ctx)
		if err != nil {
			return nil, 0, false, fmt.Errorf("prefetch: pins: %w", err)
		}
		obs.Pin = PinObservation{Can: can, Note: note, Own: own}
	}
	if len(refs) > 0 {
		obs.Images = make(map[string]ImageInfo, len(refs))
	} // else nil: Step only reads it
	lookups := 0
	for _, ref := range refs {
		if _, ok := pulling[ref]; ok {
			obs.Images[ref] = ImageInfo{Size: r.cachedSize(ref)}
			continue
		}
		present, size, err := r.Images.ImageStatus(ctx, ref)
		if err != nil {
			return nil, 0, false, fmt.Errorf("prefetch: %w", err)
		}
		if present {
			r.cacheSize(ref, size)
			info := ImageInfo{Present: true, Size: size}
			if pinner != nil {
				if info.Pinned, err = pinner.Pinned(ctx, ref); err != nil {
					return nil, 0, false, fmt.Errorf("prefetch: %w", err)
				}
			}
			obs.Images[ref] = info
			continue
		}
		size = r.cachedSize(ref)
		if size == 0 && r.Sizes != nil && lookups < maxSizeLookups && r.sizeDue(ref, now) {
			lookups++
			size = r.lookupSize(ctx, now, sets, ref)
		}
		obs.Images[ref] = ImageInfo{Size: size}
	}

	actions, progress, requeue := r.manager().Step(now, sets, current, obs)

	r.mu.Lock()
	r.results = slices.Clone(r.results[len(results):])
	r.last, r.haveLast = progress, true
	r.mu.Unlock()

	for _, a := range actions {
		switch a.Type {
		case ActionPull:
			if r.start(ctx, sets, a) && (requeue == 0 || requeue > retrySoon) {
				requeue = retrySoon
			}
		case ActionCancel:
			r.cancel(a.Image)
		case ActionRemove:
			// Step recorded the image as removed; should the removal fail,
			// the next Sync finds it present again.
			if err := r.Images.RemoveImage(ctx, a.Image); err != nil {
				return nil, 0, false, fmt.Errorf("prefetch: remove %s: %w", a.Image, err)
			}
			again = true
		case ActionPin:
			if err := pinner.Pin(ctx, a.Image); err != nil {
				return nil, 0, false, fmt.Errorf("prefetch: pin %s: %w", a.Image, err)
			}
			again = true
		case ActionUnpin:
			if err := pinner.Unpin(ctx, a.Image); err != nil {
				return nil, 0, false, fmt.Errorf("prefetch: unpin %s: %w", a.Image, err)
			}
			again = true
		}
	}
	return progress, requeue, again, nil
}

// Wait waits until no pull runs.
func (r *Runner) Wait() { r.wg.Wait() }

// Running lists the images whose pulls run, sorted.
func (r *Runner) Running() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.pulls))
}

func (r *Runner) init() {
	if r.pulls == nil {
		r.pulls = map[string]*pull{}
		r.sizes = map[string]int64{}
		r.sizeFailed = map[string]time.Time{}
	}
}

func (r *Runner) manager() *Manager {
	if r.Manager == nil {
		r.Manager = New(Config{})
	}
	return r.Manager
}

// start starts the pull a asks for. It returns true when the pull ended at
// once (its credentials could not be read), so that the caller requeues.
func (r *Runner) start(ctx context.Context, sets []v1alpha1.NodePinnedImageSet, a Action) bool {
	auth, err := r.credentials(ctx, sets, a.Set, a.Image)
	if err != nil {
		r.finish(a.Image, a.Attempt, PullResult{Image: a.Image, Attempt: a.Attempt, Kind: cri.KindAuth, Message: err.Error()})
		return true
	}
	base := r.Context
	if base == nil {
		base = context.Background()
	}
	timeout := r.PullTimeout
	if timeout <= 0 {
		timeout = DefaultPullTimeout
	}
	pctx, cancel := context.WithTimeout(base, timeout)
	r.mu.Lock()
	r.init()
	if p := r.pulls[a.Image]; p != nil {
		// Step never starts a running pull; keep the one that runs.
		r.mu.Unlock()
		cancel()
		return false
	}
	p := &pull{attempt: a.Attempt, cancel: cancel}
	r.pulls[a.Image] = p
	r.wg.Add(1)
	r.mu.Unlock()
	if r.Go != nil {
		stop := r.Go(a, func() { r.run(pctx, cancel, a, auth) })
		r.mu.Lock()
		p.cancel = func() { cancel(); stop() }
		r.mu.Unlock()
		return false
	}
	go r.run(pctx, cancel, a, auth) // edge: a pull takes minutes; it runs beside the daemon loop
	return false
}

func (r *Runner) run(ctx context.Context, cancel context.CancelFunc, a Action, auth *cri.Auth) {
	defer r.wg.Done()
	err := r.Images.Pull(ctx, a.Image, auth)
	cancel()
	res := PullResult{Image: a.Image, Attempt: a.Attempt}
	if err != nil {
		res.Kind, res.Message = cri.Classify(err), cri.Message(err)
	}
	r.finish(a.Image, a.Attempt, res)
}

func (r *Runner) finish(ref string, attempt int32, res PullResult) {
	r.mu.Lock()
	if p := r.pulls[ref]; p != nil && p.attempt == attempt {
		delete(r.pulls, ref)
	}
	r.results = append(r.results, res)
	r.mu.Unlock()
	if r.OnDone != nil {
		r.OnDone()
	}
}

func (r *Runner) cancel(ref string) {
	r.mu.Lock()
	var stop context.CancelFunc
	if p := r.pulls[ref]; p != nil {
		stop = p.cancel
	}
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func (r *Runner) credentials(ctx context.Context, sets []v1alpha1.NodePinnedImageSet, setName, ref string) (*cri.Auth, error) {
	if r.Credentials == nil {
		return nil, nil
	}
	for _, s := range sets {
		if s.Name == setName {
			auth, err := r.Credentials(ctx, s, ref)
			if err != nil {
				return nil, fmt.Errorf("credentials of set %s for %s: %w", setName, ref, err)
			}
			return auth, nil
		}
	}
	return nil, nil
}

func (r *Runner) cachedSize(ref string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sizes[ref]
}

func (r *Runner) cacheSize(ref string, size int64) {
	if size <= 0 {
		return
	}
	r.mu.Lock()
	r.sizes[ref] = size
	delete(r.sizeFailed, ref)
	r.mu.Unlock()
}

func (r *Runner) sizeDue(ref string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, failed := r.sizeFailed[ref]
	return !failed || !now.Before(at.Add(sizeRetry))
}

// lookupSize asks the registry for ref's size with the credentials of the
// first set that lists it; 0 when that fails.
func (r *Runner) lookupSize(ctx context.Context, now time.Time, sets []v1alpha1.NodePinnedImageSet, ref string) int64 {
	// The set Step's Action.Set would name.
	set := ""
	for _, s := range sortedSets(sets) {
		if !slices.Contains(s.Images, ref) {
			continue
		}
		if set == "" {
			set = s.Name
		}
		if s.PullSecret != nil {
			set = s.Name
			break
		}
	}
	auth, err := r.credentials(ctx, sets, set, ref)
	if err == nil {
		lctx, cancel := context.WithTimeout(ctx, sizeTimeout)
		var size int64
		size, err = r.Sizes.Size(lctx, ref, auth)
		cancel()
		if err == nil && size > 0 {
			r.cacheSize(ref, size)
			return size
		}
	}
	r.mu.Lock()
	r.sizeFailed[ref] = now
	r.mu.Unlock()
	return 0
}

// imagesOf lists the images of sets once each, in the order Step takes
// them.
func imagesOf(sets []v1alpha1.NodePinnedImageSet) []string {
	if len(sets) == 0 {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, s := range sortedSets(sets) {
		for _, ref := range s.Images {
			if !seen[ref] {
				seen[ref] = true
				out = append(out, ref)
			}
		}
	}
	return out
}

func sortedSets(sets []v1alpha1.NodePinnedImageSet) []v1alpha1.NodePinnedImageSet {
	sets = slices.Clone(sets)
	slices.SortStableFunc(sets, func(a, b v1alpha1.NodePinnedImageSet) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return sets
}
