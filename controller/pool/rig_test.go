package pool

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The images, digests and member Nodes of the pool reconciler's tests
// that run whole passes on a fake API (TestPassLeavesTheViewAsTheFeedSaysIt,
// TestPausedPoolDirectsNodesOnItsTarget).
const (
	rigV1 = "registry.example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	rigV2 = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

// rigDigest is the digest of one of the rig's images.
func rigDigest(ref string) string { return ref[len("registry.example/os@"):] }

// rigNode is a Node of pool workers (label pool=workers), Ready since
// readySince.
func rigNode(name string, readySince time.Time) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "workers"}}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(readySince)}}
	return n
}
