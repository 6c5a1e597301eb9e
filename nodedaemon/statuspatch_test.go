package nodedaemon

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// StatusPatch writes by hand what json.Marshal gives for the document
// below (statusPatchJSON, StatusPatch as it was), byte for byte.
func TestStatusPatchAsJSONMarshal(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 5, 1, 2, 3, 400, time.FixedZone("x", 3600)))
	zero := metav1.Time{}
	full := v1alpha1.BootcNodeStatus{
		Booted:        &v1alpha1.HostImage{Image: "q.io/os@sha256:aa", Digest: "sha256:aa", Version: "9.1 <&>", Timestamp: &t0},
		Staged:        &v1alpha1.HostImage{Image: "q.io/os:\u00e9\"x\"", Timestamp: &zero},
		RollbackImage: &v1alpha1.HostImage{},
		Daemon: v1alpha1.DaemonStatus{
			BootID: "b1", LastAttempt: &t0, LastError: "bad\n\u2028\x01 \\ end", ObservedGeneration: 7,
			Phase: v1alpha1.DaemonPhase("Staged"), StageAttempts: 3,
			LastReboot: &v1alpha1.RebootRecord{At: t0, BootID: "b0", Image: "q.io/os@sha256:bb", Rollback: true, OrderAt: &t0},
		},
	}
	noRollback := full
	noRollback.Daemon.LastReboot = &v1alpha1.RebootRecord{Image: "i"}
	noRollback.Daemon.LastAttempt = &zero
	for _, s := range []v1alpha1.BootcNodeStatus{{}, full, noRollback} {
		want, err := statusPatchJSON(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := StatusPatch(s)
		if err != nil || string(got) != string(want) {
			t.Errorf("StatusPatch =\n%s (%v)\njson.Marshal gives\n%s", got, err, want)
		}
		if !json.Valid(got) {
			t.Errorf("StatusPatch gives invalid JSON %s", got)
		}
	}
}

func statusPatchJSON(s v1alpha1.BootcNodeStatus) ([]byte, error) {
	d := s.Daemon
	dp := &daemonPatch{
		BootID: nonEmpty(d.BootID), LastAttempt: d.LastAttempt, LastError: nonEmpty(d.LastError),
		ObservedGeneration: nonZero(d.ObservedGeneration), Phase: nonEmpty(d.Phase), StageAttempts: nonZero(d.StageAttempts),
	}
	if r := d.LastReboot; r != nil {
		rp := &rebootPatch{At: r.At, BootID: r.BootID, Image: r.Image, OrderAt: r.OrderAt}
		if r.Rollback {
			rp.Rollback = &r.Rollback
		}
		dp.LastReboot = rp
	}
	var doc struct {
		Status struct {
			Booted        *hostImagePatch `json:"booted"`
			Daemon        *daemonPatch    `json:"daemon"`
			RollbackImage *hostImagePatch `json:"rollbackImage"`
			Staged        *hostImagePatch `json:"staged"`
		} `json:"status"`
	}
	doc.Status.Booted, doc.Status.Daemon = hostPatch(s.Booted), dp
	doc.Status.RollbackImage, doc.Status.Staged = hostPatch(s.RollbackImage), hostPatch(s.Staged)
	return json.Marshal(doc)
}

// The objects of StatusPatch: every key present (no omitempty), in sorted
// order; a nil pointer is sent as null.
type (
	hostImagePatch struct {
		Digest    *string      `json:"digest"`
		Image     *string      `json:"image"`
		Timestamp *metav1.Time `json:"timestamp"`
		Version   *string      `json:"version"`
	}
	rebootPatch struct {
		At       metav1.Time  `json:"at"`
		BootID   string       `json:"bootID"`
		Image    string       `json:"image"`
		OrderAt  *metav1.Time `json:"orderAt"`
		Rollback *bool        `json:"rollback"`
	}
	daemonPatch struct {
		BootID             *string               `json:"bootID"`
		LastAttempt        *metav1.Time          `json:"lastAttempt"`
		LastError          *string               `json:"lastError"`
		LastReboot         *rebootPatch          `json:"lastReboot"`
		ObservedGeneration *int64                `json:"observedGeneration"`
		Phase              *v1alpha1.DaemonPhase `json:"phase"`
		StageAttempts      *int32                `json:"stageAttempts"`
	}
)

func hostPatch(h *v1alpha1.HostImage) *hostImagePatch {
	if h == nil {
		return nil
	}
	return &hostImagePatch{Digest: nonEmpty(h.Digest), Image: nonEmpty(h.Image), Timestamp: h.Timestamp, Version: nonEmpty(h.Version)}
}

// nonEmpty and nonZero return nil for what omitempty would leave out.
func nonEmpty[T ~string](v T) *T {
	if v == "" {
		return nil
	}
	return &v
}

func nonZero[T int32 | int64](v T) *T {
	if v == 0 {
		return nil
	}
	return &v
}
