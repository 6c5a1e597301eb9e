package node

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/options"
)

// TestWithdrawVoidOrder: a boot order voided by a change of the desired
// image (given for v2, the pool then set v1) is withdrawn too, so that it
// does not stand again when the pool sets v2 back: it was given for a
// drain long over, and the daemon rebooted on it as soon as a later slot
// cordoned the node, its pods still bound (explorer seed 70058 of
// pdb-changed-mid-rollout). An order already withdrawn is not written.
func TestWithdrawVoidOrder(t *testing.T) {
	const v1 = "registry.example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	const v2 = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	at := metav1.NewTime(time.Date(2026, 1, 5, 0, 19, 21, 0, time.UTC))
	for _, withdrawn := range []bool{false, true} {
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
		bn.Spec.Pool, bn.Spec.DesiredImage = "p", v1
		bn.Spec.BootOrder = &v1alpha1.BootOrder{Image: v2, At: at, Withdrawn: withdrawn}
		cl := fakeapi.Client(t, bn.DeepCopy())
		r := NewReconciler(cl, options.Options{})
		var cur v1alpha1.BootcNode
		if err := cl.Get(context.Background(), client.ObjectKey{Name: "n"}, &cur); err != nil {
			t.Fatal(err)
		}
		rv := cur.ResourceVersion
		s := &nodeStep{bn: cur.DeepCopy(), orig: recordOf(&cur)}
		if err := r.withdrawBootOrder(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		if err := cl.Get(context.Background(), client.ObjectKey{Name: "n"}, &cur); err != nil {
			t.Fatal(err)
		}
		if !cur.Spec.BootOrder.Withdrawn {
			t.Errorf("withdrawn %v before: the void order for v2 is not withdrawn", withdrawn)
		}
		// Set back to v2: no order stands.
		cur.Spec.DesiredImage = v2
		if o := cur.Spec.Order(); o != nil {
			t.Errorf("withdrawn %v before: with v2 desired again the old order stands: %+v", withdrawn, o)
		}
		if withdrawn && cur.ResourceVersion != rv {
			t.Errorf("an order already withdrawn was written again")
		}
	}
}
