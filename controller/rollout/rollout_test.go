package rollout

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/imageref"
)

func TestMaxUnavailable(t *testing.T) {
	ptr := func(v intstr.IntOrString) *intstr.IntOrString { return &v }
	tests := []struct {
		name    string
		v       *intstr.IntOrString
		nodes   int
		want    int
		wantErr bool
	}{
		{"default is one", nil, 10, 1, false},
		{"int", ptr(intstr.FromInt32(3)), 10, 3, false},
		{"zero pauses reboots", ptr(intstr.FromInt32(0)), 10, 0, false},
		{"percent rounds down", ptr(intstr.FromString("25%")), 10, 2, false},
		{"10% of 100", ptr(intstr.FromString("10%")), 100, 10, false},
		{"small percent gives one slot", ptr(intstr.FromString("1%")), 10, 1, false},
		{"0% gives none", ptr(intstr.FromString("0%")), 10, 0, false},
		{"100%", ptr(intstr.FromString("100%")), 7, 7, false},
		{"empty pool", ptr(intstr.FromString("50%")), 0, 0, false},
		{"negative", ptr(intstr.FromInt32(-1)), 10, 0, true},
		{"not a percent", ptr(intstr.FromString("10")), 10, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MaxUnavailable(tt.v, tt.nodes)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		failures int32
		want     time.Duration
	}{{1, 30 * time.Second}, {2, time.Minute}, {3, 2 * time.Minute}, {7, 30 * time.Minute}, {50, 30 * time.Minute}}
	for _, tt := range tests {
		if got := Backoff(tt.failures); got != tt.want {
			t.Errorf("Backoff(%d) = %s, want %s", tt.failures, got, tt.want)
		}
	}
}

func TestInWindow(t *testing.T) {
	mon := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC) // a Monday
	nightly := []v1alpha1.MaintenanceWindow{{Start: "22:00", Duration: metav1.Duration{Duration: 4 * time.Hour}}}
	weekend := []v1alpha1.MaintenanceWindow{{Days: []v1alpha1.Weekday{"Sat", "Sun"}, Start: "02:00", Duration: metav1.Duration{Duration: time.Hour}}}
	tests := []struct {
		name     string
		windows  []v1alpha1.MaintenanceWindow
		at       time.Time
		wantOpen bool
		wantWait time.Duration
	}{
		{"no windows is always open", nil, mon.Add(13 * time.Hour), true, 0},
		{"inside", nightly, mon.Add(23 * time.Hour), true, 0},
		{"past midnight, opened yesterday", nightly, mon.Add(25 * time.Hour), true, 0},
		{"at the end it is closed", nightly, mon.Add(26 * time.Hour), false, 20 * time.Hour},
		{"before", nightly, mon.Add(12 * time.Hour), false, 10 * time.Hour},
		{"weekend only, on monday", weekend, mon.Add(3 * time.Hour), false, 4*24*time.Hour + 23*time.Hour},
		{"weekend only, on saturday", weekend, mon.AddDate(0, 0, 5).Add(2*time.Hour + 30*time.Minute), true, 0},
		{"window on a day not listed does not open", weekend, mon.AddDate(0, 0, 4).Add(2*time.Hour + 30*time.Minute), false, 23*time.Hour + 30*time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			open, wait := InWindow(tt.windows, tt.at)
			if open != tt.wantOpen || wait != tt.wantWait {
				t.Errorf("InWindow = (%v, %s), want (%v, %s)", open, wait, tt.wantOpen, tt.wantWait)
			}
		})
	}
}

// pickSlots takes up to free names from SlotOrder, as the pool does.
func pickSlots(cands []Candidate, free int) []string {
	next := SlotOrder(cands)
	var out []string
	for len(out) < free {
		name, ok := next()
		if !ok {
			break
		}
		out = append(out, name)
	}
	return out
}

func TestPickSlots(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	cands := func() []Candidate {
		return []Candidate{{"c", t0}, {"a", t0.Add(time.Minute)}, {"b", t0}, {"d", t0.Add(-time.Minute)}}
	}
	tests := []struct {
		name string
		free int
		want []string
	}{
		{"none free", 0, nil},
		{"longest staged first, then name", 3, []string{"d", "b", "c"}},
		{"more free than candidates", 10, []string{"d", "b", "c", "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pickSlots(cands(), tt.free)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestSummary(t *testing.T) {
	got := Summary(7, 10, []v1alpha1.PhaseCount{{Phase: v1alpha1.PhaseStaging, Nodes: 2}, {Phase: v1alpha1.PhaseRebooting, Nodes: 1}, {Phase: v1alpha1.PhaseUpdated, Nodes: 7}}, 0)
	if want := "7/10 updated; 2 staging; 1 rebooting"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	got = Summary(0, 2, []v1alpha1.PhaseCount{{Phase: v1alpha1.PhaseStaged, Nodes: 2}}, 1)
	if want := "0/2 updated; 2 staged; 1 leaving"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// Summary says what the fmt.Sprintf version it replaced said, for every
// phase, count and sign.
func TestSummaryMatchesSprintf(t *testing.T) {
	sprintf := func(updated, total int32, phases []v1alpha1.PhaseCount, leaving int32) string {
		parts := []string{fmt.Sprintf("%d/%d updated", updated, total)}
		for _, pc := range phases {
			if pc.Phase == v1alpha1.PhaseUpdated || pc.Nodes == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%d %s", pc.Nodes, strings.ToLower(string(pc.Phase))))
		}
		if leaving > 0 {
			parts = append(parts, fmt.Sprintf("%d leaving", leaving))
		}
		return strings.Join(parts, "; ")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	n := func() int32 { return int32(rng.IntN(2100) - 50) }
	for range 2000 {
		var phases []v1alpha1.PhaseCount
		for _, ph := range append(slices.Clone(v1alpha1.AllPhases), "ÄÖ-Odd") {
			if rng.IntN(3) > 0 {
				phases = append(phases, v1alpha1.PhaseCount{Phase: ph, Nodes: n()})
			}
		}
		u, tot, l := n(), n(), n()
		if got, want := Summary(u, tot, phases, l), sprintf(u, tot, phases, l); got != want {
			t.Fatalf("Summary = %q, want %q", got, want)
		}
	}
}

func TestStagingPhase(t *testing.T) {
	target := "registry.example/os@sha256:" + "b" + zeros(63)
	old := "sha256:a" + zeros(63)
	img := func(d string) *v1alpha1.HostImage { return &v1alpha1.HostImage{Digest: d} }
	// stored is what the node reconciler writes; observed is what the pool
	// and people read (ObservedPhase): staging and staged are derived from
	// the daemon's report, never written.
	tests := []struct {
		name       string
		bn         v1alpha1.BootcNode
		stored     v1alpha1.NodePhase
		wantReason string
		observed   v1alpha1.NodePhase
	}{
		{"no target", v1alpha1.BootcNode{}, v1alpha1.PhasePending, "", v1alpha1.PhasePending},
		{"running target", v1alpha1.BootcNode{Spec: v1alpha1.BootcNodeSpec{DesiredImage: target}, Status: v1alpha1.BootcNodeStatus{Booted: img(imageref.Digest(target))}}, v1alpha1.PhaseUpdated, "", v1alpha1.PhasePending},
		{"booted the target before a reboot it has not reported since", v1alpha1.BootcNode{Spec: v1alpha1.BootcNodeSpec{DesiredImage: target}, Status: v1alpha1.BootcNodeStatus{Booted: img(imageref.Digest(target)),
			Daemon: v1alpha1.DaemonStatus{BootID: "b1", LastReboot: &v1alpha1.RebootRecord{Image: "registry.example/os@" + old, BootID: "b1"}}}}, v1alpha1.PhasePending, "", v1alpha1.PhasePending},
		{"reported since its last reboot", v1alpha1.BootcNode{Spec: v1alpha1.BootcNodeSpec{DesiredImage: target}, Status: v1alpha1.BootcNodeStatus{Booted: img(imageref.Digest(target)),
			Daemon: v1alpha1.DaemonStatus{BootID: "b2", LastReboot: &v1alpha1.RebootRecord{Image: target, BootID: "b1"}}}}, v1alpha1.PhaseUpdated, "", v1alpha1.PhasePending},
		{"staged", v1alpha1.BootcNode{Spec: v1alpha1.BootcNodeSpec{DesiredImage: target}, Status: v1alpha1.BootcNodeStatus{Booted: img(old), Staged: img(imageref.Digest(target))}}, v1alpha1.PhasePending, "", v1alpha1.PhaseStaged},
		{"staging", v1alpha1.BootcNode{Spec: v1alpha1.BootcNodeSpec{DesiredImage: target}, Status: v1alpha1.BootcNodeStatus{Booted: img(old), Daemon: v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaging}}}, v1alpha1.PhasePending, "", v1alpha1.PhaseStaging},
		{"stage failed is Degraded, not Failed", v1alpha1.BootcNode{Spec: v1alpha1.BootcNodeSpec{DesiredImage: target}, Status: v1alpha1.BootcNodeStatus{Booted: img(old), Daemon: v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonError, StageAttempts: 2, LastError: "manifest unknown"}}}, v1alpha1.PhaseDegraded, "StageFailed", v1alpha1.PhasePending},
		{"a stored Staged of an older bootroll reads from the report", v1alpha1.BootcNode{Spec: v1alpha1.BootcNodeSpec{DesiredImage: target}, Status: v1alpha1.BootcNodeStatus{Phase: v1alpha1.PhaseStaged, Booted: img(old), Daemon: v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaging}}}, v1alpha1.PhasePending, "", v1alpha1.PhaseStaging},
		{"a slot phase is as stored", v1alpha1.BootcNode{Spec: v1alpha1.BootcNodeSpec{DesiredImage: target}, Status: v1alpha1.BootcNodeStatus{Phase: v1alpha1.PhaseDraining, Booted: img(old), Staged: img(imageref.Digest(target))}}, v1alpha1.PhasePending, "", v1alpha1.PhaseDraining},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason, _ := StagingPhase(&tt.bn)
			if got != tt.stored || reason != tt.wantReason {
				t.Errorf("stored (%s, %s), want (%s, %s)", got, reason, tt.stored, tt.wantReason)
			}
			if o := tt.bn; o.Status.Phase == "" || o.Status.Phase == v1alpha1.PhasePending || o.Status.Phase == v1alpha1.PhaseStaged || o.Status.Phase == v1alpha1.PhaseDraining {
				if got := ObservedPhase(&o); got != tt.observed {
					t.Errorf("observed %s, want %s", got, tt.observed)
				}
			}
		})
	}
}

func zeros(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '0'
	}
	return string(b)
}

// SlotOrder must give exactly the order of a full sort (longest staged
// first, then name), however the candidates come in, including ties.
func TestSlotOrderMatchesSort(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		n := rng.IntN(60)
		cands := make([]Candidate, n)
		for i := range cands {
			// Few distinct times, so many ties fall back to the name.
			cands[i] = Candidate{Name: fmt.Sprintf("n-%03d", rng.IntN(1000)), StagedSince: t0.Add(time.Duration(rng.IntN(5)) * time.Second)}
		}
		want := slices.Clone(cands)
		slices.SortStableFunc(want, func(a, b Candidate) int {
			if c := a.StagedSince.Compare(b.StagedSince); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
		next := SlotOrder(slices.Clone(cands))
		for i := range want {
			got, ok := next()
			if !ok || got != want[i].Name {
				t.Fatalf("round %d: item %d = %q (%v), want %q", round, i, got, ok, want[i].Name)
			}
		}
		if got, ok := next(); ok {
			t.Fatalf("round %d: extra item %q after %d", round, got, n)
		}
	}
}

func TestPostUpdateProtection(t *testing.T) {
	pool := func(d *time.Duration) *v1alpha1.BootcNodePool {
		p := &v1alpha1.BootcNodePool{}
		if d != nil {
			p.Spec.Karpenter.PostUpdateProtection = &metav1.Duration{Duration: *d}
		}
		return p
	}
	zero, ten := time.Duration(0), 10*time.Minute
	tests := []struct {
		name    string
		d       *time.Duration
		claimed bool
		want    time.Duration
	}{
		{"unset on a Karpenter node is the default", nil, true, DefaultPostUpdateProtection},
		{"unset on any other node is none", nil, false, 0},
		{"0s turns it off", &zero, true, 0},
		{"set applies to a Karpenter node", &ten, true, ten},
		{"set applies to any node", &ten, false, ten},
	}
	for _, tt := range tests {
		if got := PostUpdateProtection(pool(tt.d), tt.claimed); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestAggregateCountsMembersOnly: a record whose Node left the pool is not
// a member (status.phases counts members per phase, updatedNodes members on
// the target); the summary says it is leaving (a pool of 2 said "0/2
// updated; 3 staged").
func TestAggregateCountsMembersOnly(t *testing.T) {
	target := "registry.example/os@sha256:" + "b" + zeros(63)
	staged := func(name string, member bool) Row {
		bn := &v1alpha1.BootcNode{}
		bn.Name = name
		bn.Spec.DesiredImage = target
		bn.Status.Phase = v1alpha1.PhasePending
		bn.Status.Staged = &v1alpha1.HostImage{Image: target, Digest: "sha256:b" + zeros(63)}
		bn.Status.Booted = &v1alpha1.HostImage{Image: "registry.example/os@sha256:" + "a" + zeros(63), Digest: "sha256:a" + zeros(63)}
		r := Row{Name: name}
		r.SetRecord(bn, func(s string) string { return s })
		if member {
			r.SetNode(&corev1.Node{})
		}
		return r
	}
	pool := &v1alpha1.BootcNodePool{}
	p := &Pass{Pool: pool, Rows: []Row{staged("a", true), staged("b", true), staged("c", false)}, Members: 2, Target: target, TargetDigest: "sha256:b" + zeros(63)}
	p.aggregate()
	if got, want := pool.Status.Summary, "0/2 updated; 2 staged; 1 leaving"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	var n int32
	for _, pc := range pool.Status.Phases {
		n += pc.Nodes
	}
	if n != 2 {
		t.Errorf("status.phases counts %d nodes, want the 2 members: %v", n, pool.Status.Phases)
	}
}
