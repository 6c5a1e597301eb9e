package node

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestDeadlineRetriesLogOncePerMinute: a node whose release fails every
// second for two minutes logs the error at the first try and once a
// minute after, with the count of the tries it did not log; a new error,
// another node or another deadline logs at once. Every try is still
// retried after ConflictRetry at OwedPriority.
func TestDeadlineRetriesLogOncePerMinute(t *testing.T) {
	start := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	r := &Reconciler{clock: clk}
	var lines []string
	ctx := log.IntoContext(context.Background(), funcr.New(func(prefix, args string) {
		lines = append(lines, args)
	}, funcr.Options{}))
	bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "workers-1"}}
	forbidden := errors.New(`nodes "workers-1" is forbidden`)
	for i := range 120 {
		clk.SetTime(start.Add(time.Duration(i) * time.Second))
		res := r.retryBeforeDeadline(ctx, bn, forbidden, owedRelease)
		if res.RequeueAfter != ConflictRetry || res.Priority == nil || *res.Priority != OwedPriority {
			t.Fatalf("try %d: %+v, want a retry after %s at priority %d", i, res, ConflictRetry, OwedPriority)
		}
	}
	if len(lines) != 2 || !strings.Contains(lines[0], `"notLoggedSinceLast"=0`) || !strings.Contains(lines[1], `"notLoggedSinceLast"=59`) {
		t.Fatalf("120 tries a second apart logged %d lines, want 2 (the first, and the same error a minute later with 59 not logged):\n%s", len(lines), strings.Join(lines, "\n"))
	}
	lines = nil
	clk.SetTime(start.Add(120 * time.Second))
	r.retryBeforeDeadline(ctx, bn, errors.New("the server is currently unable to handle the request"), owedRelease)
	r.retryBeforeDeadline(ctx, bn, forbidden, owedSlotEnd)
	r.retryBeforeDeadline(ctx, &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "workers-2"}}, forbidden, owedRelease)
	if len(lines) != 3 {
		t.Fatalf("a new error, another deadline and another node logged %d lines, want 3:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}
