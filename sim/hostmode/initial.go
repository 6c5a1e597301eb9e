package hostmode

import (
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/bootroll/bootroll/internal/imageref"
	"github.com/bootroll/bootroll/sim/scenario"
)

// Annotations host mode keeps on each Node it plays, so that a host-mode
// process that starts again (a daemon restart) finds the host as it was,
// as a real host's deployments outlive its daemon.
const (
	// AnnotationBooted is the reference of the booted image.
	AnnotationBooted = "hostmode.bootroll.dev/booted"
	// AnnotationRollback is the reference of the rollback deployment.
	AnnotationRollback = "hostmode.bootroll.dev/rollback"
)

// karpenterNodePoolLabel is the label Karpenter puts on the Nodes of a
// NodePool.
const karpenterNodePoolLabel = "karpenter.sh/nodepool"

// Initial is what a played node boots when host mode starts playing it.
type Initial struct {
	Booted *scenario.Image
	// Ref is the reference Booted was booted from.
	Ref string
	// Rollback, when set, is the rollback deployment, from RollbackRef.
	Rollback    *scenario.Image
	RollbackRef string
	// From says where it came from, for the log.
	From string
	// Group is the scenario node group of the node, if any.
	Group *scenario.NodeGroup
}

// InitialState decides what node boots when host mode starts playing it:
// what the Node already says (AnnotationBooted, from an earlier host-mode
// process), else the bootImage of the scenario's node group whose labels
// (all of them, at least one) the Node carries, or whose nodes are named
// like it (<group>-<i>), else that of the node class of its Karpenter
// NodePool (label karpenter.sh/nodepool), else the scenario's first image.
func InitialState(sc *scenario.Scenario, node *corev1.Node) Initial {
	g := groupOf(sc, node)
	var in Initial
	in.Group = g
	if ref := node.Annotations[AnnotationBooted]; ref != "" {
		if im := lookup(sc, ref); im != nil {
			in.Booted, in.Ref, in.From = im, ref, "annotation "+AnnotationBooted
			if rb := node.Annotations[AnnotationRollback]; rb != "" {
				if im := lookup(sc, rb); im != nil {
					in.Rollback, in.RollbackRef = im, rb
				}
			}
			return in
		}
	}
	switch {
	case g != nil:
		in.Booted, in.From = sc.Image(g.BootImage), "node group "+g.Name
	case sc.Karpenter != nil && node.Labels[karpenterNodePoolLabel] != "":
		if name := nodeClassBootImage(sc.Karpenter, node.Labels[karpenterNodePoolLabel]); name != "" {
			in.Booted, in.From = sc.Image(name), "node class of Karpenter NodePool "+node.Labels[karpenterNodePoolLabel]
		}
	}
	if in.Booted == nil {
		in.Booted, in.From = &sc.Images[0], "the scenario's first image"
	}
	in.Ref = digestRef(in.Booted)
	return in
}

// groupOf is the scenario node group of node: the first whose labels
// the Node all carries, else the one whose nodes are named like it.
func groupOf(sc *scenario.Scenario, node *corev1.Node) *scenario.NodeGroup {
	for i := range sc.NodeGroups {
		g := &sc.NodeGroups[i]
		if len(g.Labels) == 0 {
			continue
		}
		all := true
		for k, v := range g.Labels {
			if node.Labels[k] != v {
				all = false
				break
			}
		}
		if all {
			return g
		}
	}
	for i := range sc.NodeGroups {
		g := &sc.NodeGroups[i]
		rest, ok := strings.CutPrefix(node.Name, g.Name+"-")
		if n, err := strconv.Atoi(rest); ok && err == nil && strconv.Itoa(n) == rest {
			return g
		}
	}
	return nil
}

// nodeClassBootImage is the bootImage of the node class of the scenario's
// Karpenter NodePool pool ("" when there is none).
func nodeClassBootImage(k *scenario.Karpenter, pool string) string {
	for _, np := range k.NodePools {
		if np.Name != pool {
			continue
		}
		for _, nc := range k.NodeClasses {
			if nc.Name == np.NodeClass || np.NodeClass == "" && len(k.NodeClasses) == 1 {
				return nc.BootImage
			}
		}
	}
	return ""
}

// digestRef is the digest reference of an image: its ref when that is
// one, else the ref's repository with the digest.
func digestRef(im *scenario.Image) string {
	if imageref.IsDigest(im.Ref) {
		return im.Ref
	}
	if ref, err := imageref.WithDigest(im.Ref, im.Digest); err == nil {
		return ref
	}
	return im.Ref
}

// available is the free space of a node's image filesystem: its group's
// imageFsCapacity less imageFsUsed, 100Gi without a group (the default).
func available(g *scenario.NodeGroup) int64 {
	if g == nil {
		return 100 << 30
	}
	return g.ImageFsCapacity.Value() - g.ImageFsUsed.Value()
}

// NodeRand is node's source of randomness: seeded from the run's seed and
// the node's name, so each node draws the same values for one seed
// whatever the others do.
func NodeRand(seed uint64, node string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(node))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}
