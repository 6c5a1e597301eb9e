package invariant

import (
	"fmt"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/scenario"
)

// This file holds halt-is-final: once a pool is halted for a target image
// (condition Halted=True for its current generation, with the target in
// status.targetImage), no node gets a slot (a new status.slots entry for
// that image) or a boot order (a BootcNode of the pool given a
// spec.bootOrder that stands for spec.desiredImage that image) for that
// target until the pool's spec.image changes, whatever happens to the
// failed nodes or to the condition afterwards. The checker remembers the
// halt itself, by pool and target digest; only a spec.image change, or
// the pool's deletion, forgets it.

// halt is one remembered halt.
type halt struct {
	pool, target string // target is the digest
	targetRef    string
	epoch        int // the pool's ImageEpoch when it halted
	at           string
	// before are the slot entries for the target held before the status
	// that reported the halt (node + "\x00" + since): they are not new
	// grants.
	before   map[string]bool
	reported map[string]bool
}

// digestOf returns the digest of a digest reference ("repo@sha256:" and
// 64 lower-case hex digits, as DESIGN.md and the CRD define one), or the
// string itself when it is not one (a bare digest, or a malformed
// reference, which then equals no digest but itself). The checker reads
// references by the specification, not with the parser of the code it
// judges (internal/imageref); TestDigestOfAgreesWithImageref checks that
// the two agree.
func digestOf(ref string) string {
	// A digest reference ends in "@sha256:" and 64 hex digits, none of
	// them an '@', so its last '@' is the 72nd byte from the end: the
	// test reads the tail only (LastIndexByte scanned the whole
	// reference, and digestOf is called at every BootcNode event and
	// reboot).
	const tail = len("@sha256:") + 64
	i := len(ref) - tail
	if i <= 0 || ref[i] != '@' || ref[i+1:i+8] != "sha256:" || !lowerHex64(ref[i+8:]) {
		return ref
	}
	return ref[i+1:]
}

// lowerHex64 reports whether s, of 64 bytes, is made of 0-9 and a-f only.
// It reads eight bytes at a time: a byte below 0x80 plus 0x80-lo has its
// high bit set when it is at least lo, plus 0x7f-hi when it is above hi,
// and no sum carries into the next byte.
func lowerHex64(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	_ = s[63]
	for k := 0; k < 64; k += 8 {
		x := uint64(s[k]) | uint64(s[k+1])<<8 | uint64(s[k+2])<<16 | uint64(s[k+3])<<24 |
			uint64(s[k+4])<<32 | uint64(s[k+5])<<40 | uint64(s[k+6])<<48 | uint64(s[k+7])<<56
		if x&highs != 0 {
			return false
		}
		digit := (x + (0x80-'0')*ones) &^ (x + (0x7f-'9')*ones)
		letter := (x + (0x80-'a')*ones) &^ (x + (0x7f-'f')*ones)
		if (digit|letter)&highs != highs {
			return false
		}
	}
	return true
}

func slotKey(s v1alpha1.Slot) string { return s.Node + "\x00" + s.Since.UTC().String() }

// haltPool follows a pool event: it forgets halts of a pool whose
// spec.image changed or that is deleted, remembers a new halt, and checks
// the slot table against the halts.
func (c *Checker) haltPool(p *Pool, o *v1alpha1.BootcNodePool, deleted bool) {
	hs := c.halts[p.Name]
	if deleted {
		delete(c.halts, p.Name)
		return
	}
	kept := hs[:0]
	for _, h := range hs {
		if h.epoch == p.ImageEpoch {
			kept = append(kept, h)
		}
	}
	hs = kept
	if p.Halted && p.TargetImage != "" {
		d := digestOf(p.TargetImage)
		known := false
		for _, h := range hs {
			known = known || h.target == d
		}
		if !known {
			h := &halt{pool: p.Name, target: d, targetRef: p.TargetImage, epoch: p.ImageEpoch, at: c.now().Sub(c.start).String(),
				before: map[string]bool{}, reported: map[string]bool{}}
			for _, s := range p.prevSlots {
				if digestOf(s.Image) == d {
					h.before[slotKey(s)] = true
				}
			}
			hs = append(hs, h)
		}
	}
	if len(hs) == 0 {
		delete(c.halts, p.Name)
		return
	}
	c.halts[p.Name] = hs
	if !c.enabled[scenario.InvHaltIsFinal] {
		return
	}
	for _, h := range hs {
		for _, s := range o.Status.Slots {
			k := slotKey(s)
			if digestOf(s.Image) != h.target || h.before[k] || h.reported["slot\x00"+k] {
				continue
			}
			h.reported["slot\x00"+k] = true
			c.record(Violation{Invariant: string(scenario.InvHaltIsFinal), At: c.now().Sub(c.start), Objects: []string{"BootcNodePool/" + p.Name, "Node/" + s.Node},
				Message: fmt.Sprintf("pool %s halted for %s at %s, yet gives node %s a slot for it (spec.image %s unchanged)", p.Name, h.targetRef, h.at, s.Node, p.SpecImage)})
		}
	}
}

// haltBootcNode checks a BootcNode event against the halts of its pool: a
// boot order for a halted target that the node did not have before is a
// violation.
func (c *Checker) haltBootcNode(n *Node, t apiserver.EventType, old, o *v1alpha1.BootcNode) {
	if t == apiserver.Deleted || !c.enabled[scenario.InvHaltIsFinal] {
		return
	}
	hs := c.halts[o.Spec.Pool]
	if len(hs) == 0 || !orderStands(o) || o.Spec.BootOrder.Rollback {
		// A rollback order leaves the image: not an order to boot it.
		return
	}
	d := digestOf(o.Spec.DesiredImage)
	if old != nil && orderStands(old) && digestOf(old.Spec.DesiredImage) == d && old.Spec.BootOrder.At.Equal(&o.Spec.BootOrder.At) {
		return
	}
	for _, h := range hs {
		if h.target != d || h.reported["order\x00"+o.Name+"\x00"+o.ResourceVersion] {
			continue
		}
		h.reported["order\x00"+o.Name+"\x00"+o.ResourceVersion] = true
		c.record(Violation{Invariant: string(scenario.InvHaltIsFinal), At: c.now().Sub(c.start), Objects: []string{"BootcNodePool/" + h.pool, "Node/" + n.Name},
			Message: fmt.Sprintf("pool %s halted for %s at %s, yet BootcNode %s is ordered to boot it (spec.bootOrder)", h.pool, h.targetRef, h.at, o.Name)})
	}
}
