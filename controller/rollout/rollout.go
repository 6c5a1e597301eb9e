package rollout

import (
	"container/heap"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/backoff"
)

// Defaults of the pool options, applied when a field is unset.
const (
	DefaultDrainTimeout  = 10 * time.Minute
	DefaultHealthTimeout = 15 * time.Minute
	DefaultMaxFailures   = 1
	// DefaultPostUpdateProtection: see PostUpdateProtection.
	DefaultPostUpdateProtection = 5 * time.Minute
	// ResolveInterval is how often a tag is re-resolved to a digest.
	ResolveInterval = 5 * time.Minute
	// DrainPoll is how often a drain in progress is re-checked.
	DrainPoll = 5 * time.Second
	// VerifyPoll is how often a rebooting node is re-checked when no event
	// comes. Verification is driven by events (the daemon's BootcNode
	// status, the Node's readiness) and by the healthTimeout deadline; the
	// poll is only a safety net, so it is long.
	VerifyPoll = time.Minute
	// PoolStatusDebounce batches node events into one pool reconcile, so a
	// pool's O(nodes) status aggregation runs at most about once per period
	// however many nodes change.
	PoolStatusDebounce = time.Second
	// BackoffBase and BackoffCap bound the retry backoff of drains and
	// staging; cordon/uncordon never flaps faster than this.
	BackoffBase = 30 * time.Second
	BackoffCap  = 30 * time.Minute
)

// MaxUnavailable returns the number of reboot slots of a pool with the
// given number of nodes. A percentage is rounded down but gives at least
// one slot when it is above zero and the pool is not empty.
func MaxUnavailable(v *intstr.IntOrString, nodes int) (int, error) {
	if v == nil {
		return 1, nil
	}
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			return 0, fmt.Errorf("spec.rollout.maxUnavailable: %d is negative", v.IntVal)
		}
		return int(v.IntVal), nil
	}
	s := v.StrVal
	if !strings.HasSuffix(s, "%") {
		return 0, fmt.Errorf("spec.rollout.maxUnavailable: %q is neither an integer nor a percentage", s)
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, nodes, false)
	if err != nil {
		return 0, fmt.Errorf("spec.rollout.maxUnavailable: %w", err)
	}
	if n == 0 && nodes > 0 && s != "0%" {
		n = 1
	}
	return n, nil
}

// Backoff is the delay before retry number failures (1-based) of a drain
// or staging: BackoffBase doubled each time, capped at BackoffCap.
func Backoff(failures int32) time.Duration {
	return backoff.Nth(BackoffBase, BackoffCap, max(failures, 1))
}

var weekdays = map[v1alpha1.Weekday]time.Weekday{
	"Sun": time.Sunday, "Mon": time.Monday, "Tue": time.Tuesday, "Wed": time.Wednesday,
	"Thu": time.Thursday, "Fri": time.Friday, "Sat": time.Saturday,
}

// InWindow reports whether t falls in one of the maintenance windows (all
// in UTC), and when not, how long until the next one opens. No windows
// means always open.
func InWindow(windows []v1alpha1.MaintenanceWindow, t time.Time) (bool, time.Duration) {
	if len(windows) == 0 {
		return true, 0
	}
	t = t.UTC()
	next := time.Duration(-1)
	for _, w := range windows {
		var hh, mm int
		if _, err := fmt.Sscanf(w.Start, "%d:%d", &hh, &mm); err != nil {
			continue
		}
		// A window may have opened yesterday and still be open.
		for day := -1; day <= 7; day++ {
			d := t.AddDate(0, 0, day)
			open := time.Date(d.Year(), d.Month(), d.Day(), hh, mm, 0, 0, time.UTC)
			if !windowDay(w.Days, open.Weekday()) {
				continue
			}
			end := open.Add(w.Duration.Duration)
			if !t.Before(open) && t.Before(end) {
				return true, 0
			}
			if open.After(t) {
				if wait := open.Sub(t); next < 0 || wait < next {
					next = wait
				}
				break
			}
		}
	}
	if next < 0 {
		next = 24 * time.Hour
	}
	return false, next
}

// OpensOn reports whether window w opens on weekday wd (every day when
// it names none), as InWindow and WindowClose read it.
func OpensOn(w v1alpha1.MaintenanceWindow, wd time.Weekday) bool { return windowDay(w.Days, wd) }

func windowDay(days []v1alpha1.Weekday, wd time.Weekday) bool {
	if len(days) == 0 {
		return true
	}
	for _, d := range days {
		if weekdays[d] == wd {
			return true
		}
	}
	return false
}

// Candidate is a node that may be given a reboot slot.
type Candidate struct {
	Name string
	// StagedSince orders candidates: the longest-staged first, then by name.
	StagedSince time.Time
}

// SlotOrder returns the candidates one at a time in the order reboot slots
// go to them: longest staged first, then by name, so the choice is
// deterministic. It heapifies instead of sorting, so taking k of n costs O(n + k log n): a
// pool pass usually takes a few of hundreds. It reorders cands.
func SlotOrder(cands []Candidate) func() (string, bool) {
	h := candHeap(cands)
	heap.Init(&h)
	return func() (string, bool) {
		if h.Len() == 0 {
			return "", false
		}
		return heap.Pop(&h).(Candidate).Name, true
	}
}

type candHeap []Candidate

func (h candHeap) Len() int { return len(h) }
func (h candHeap) Less(i, j int) bool {
	if !h[i].StagedSince.Equal(h[j].StagedSince) {
		return h[i].StagedSince.Before(h[j].StagedSince)
	}
	return h[i].Name < h[j].Name
}
func (h candHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *candHeap) Push(x any)   { *h = append(*h, x.(Candidate)) }
func (h *candHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// Summary breaks a pool down for a person: "7/10 updated; 2 staging; 1 rebooting".
func Summary(updated, total int32, phases []v1alpha1.PhaseCount, leaving int32) string {
	// Appended, not formatted: a pass writes it every second.
	b := make([]byte, 0, 64)
	b = strconv.AppendInt(b, int64(updated), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(total), 10)
	b = append(b, " updated"...)
	for _, pc := range phases {
		if pc.Phase == v1alpha1.PhaseUpdated || pc.Nodes == 0 {
			continue
		}
		b = append(b, "; "...)
		b = strconv.AppendInt(b, int64(pc.Nodes), 10)
		b = append(b, ' ')
		b = append(b, strings.ToLower(string(pc.Phase))...)
	}
	if leaving > 0 {
		b = append(b, "; "...)
		b = strconv.AppendInt(b, int64(leaving), 10)
		b = append(b, " leaving"...)
	}
	return string(b)
}

// PostUpdateProtection is how long a node keeps Karpenter's protection
// after its slot: the pool's spec.karpenter.postUpdateProtection (0s turns
// it off), or when unset DefaultPostUpdateProtection on a node Karpenter
// manages (claimed: owned by a NodeClaim), long enough for pods to come
// back before consolidation counts the node bootroll drained as empty,
// and none on any other node, which Karpenter never disrupts
// (docs/decisions.md).
func PostUpdateProtection(p *v1alpha1.BootcNodePool, claimed bool) time.Duration {
	switch {
	case p.Spec.Karpenter.PostUpdateProtection != nil:
		return p.Spec.Karpenter.PostUpdateProtection.Duration
	case claimed:
		return DefaultPostUpdateProtection
	}
	return 0
}
