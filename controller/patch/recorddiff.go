package patch

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// appendRecordDiff appends the merge patch of the controller's part of a
// BootcNode status (controllerPart) from (aPhase, a) to (bPhase, b): the
// bytes appendMergeDiff gives for the two controllerParts, written out
// field by field without reflection. The record is written at every step
// of a node, and the reflective walk, with a json.Marshal of each changed
// time, was most of the cost of building its patch.
// TestRecordDiffAsMergeDiff compares the two; TestRecordDiffFields fails
// when RolloutStatus gains a field, which must be diffed here too.
func appendRecordDiff(buf []byte, aPhase, bPhase v1alpha1.NodePhase, a, b *v1alpha1.RolloutStatus) []byte {
	w := objectWriter{buf: append(buf, '{')}
	w.string(`"phase":`, string(aPhase), string(bPhase))
	// "rollout" is not omitempty: it is sent, as an object, when a
	// member of it changed.
	rollout := len(w.buf)
	ro := objectWriter{buf: append(w.member(`"rollout":`), '{')}
	// The members in the order of their JSON names (fieldsOf's order).
	ro.strings(`"addedAnnotations":`, a.AddedAnnotations, b.AddedAnnotations)
	ro.strings(`"addedNodeClaimAnnotations":`, a.AddedNodeClaimAnnotations, b.AddedNodeClaimAnnotations)
	ro.bool(`"cordoned":`, a.Cordoned, b.Cordoned)
	ro.time(`"drainStartedAt":`, a.DrainStartedAt, b.DrainStartedAt)
	ro.string(`"failedImage":`, a.FailedImage, b.FailedImage)
	ro.int(`"failures":`, int64(a.Failures), int64(b.Failures))
	ro.string(`"message":`, a.Message, b.Message)
	ro.time(`"phaseSince":`, a.PhaseSince, b.PhaseSince)
	ro.boolPtr(`"priorUnschedulable":`, a.PriorUnschedulable, b.PriorUnschedulable)
	ro.time(`"protectUntil":`, a.ProtectUntil, b.ProtectUntil)
	ro.string(`"reason":`, a.Reason, b.Reason)
	ro.time(`"retryAfter":`, a.RetryAfter, b.RetryAfter)
	ro.string(`"rollbackTo":`, a.RollbackTo, b.RollbackTo)
	ro.time(`"slotGrantedAt":`, a.SlotGrantedAt, b.SlotGrantedAt)
	ro.string(`"targetImage":`, a.TargetImage, b.TargetImage)
	if ro.wrote {
		w.buf = append(ro.buf, '}')
		w.wrote = true
	} else {
		w.buf = ro.buf[:rollout] // nothing to send: no "rollout" either
	}
	return append(w.buf, '}') // "{}" when nothing changed
}

// objectWriter appends the members of one object of a merge patch, each
// after a comma unless it is the first; every field it diffs is
// omitempty, as appendMembers diffs such a field.
type objectWriter struct {
	buf   []byte
	wrote bool // a member was written
}

// member returns buf with the key of a member (a JSON string and a colon)
// appended, after a comma when a member was written before; the caller
// appends the value and keeps the result.
func (w *objectWriter) member(key string) []byte {
	buf := w.buf
	if w.wrote {
		buf = append(buf, ',')
	}
	return append(buf, key...)
}

// null writes key's member as null: b omits a field a had.
func (w *objectWriter) null(key string) {
	w.buf = append(w.member(key), "null"...)
	w.wrote = true
}

// string diffs an omitempty string: two strings of valid UTF-8 encode
// alike exactly when they are equal; others are compared by their
// encoding (encoding/json writes invalid bytes as U+FFFD).
func (w *objectWriter) string(key, a, b string) {
	switch {
	case b == "":
		if a != "" {
			w.null(key)
		}
		return
	case a == b:
		return
	case a != "" && !(utf8.ValidString(a) && utf8.ValidString(b)) && sameStringJSON(a, b):
		return
	}
	w.buf, _ = appendJSONString(w.member(key), b) // a string always encodes
	w.wrote = true
}

func sameStringJSON(a, b string) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// strings diffs an omitempty []string, sent whole when it changed.
func (w *objectWriter) strings(key string, a, b []string) {
	switch {
	case len(b) == 0:
		if len(a) > 0 {
			w.null(key)
		}
		return
	case len(a) > 0 && slices.Equal(a, b):
		return
	}
	buf := w.member(key)
	value := len(buf)
	buf = appendStringsJSON(buf, b)
	if len(a) > 0 && bytes.Equal(appendStringsJSON(nil, a), buf[value:]) {
		// Unequal lists whose strings are not valid UTF-8 may still
		// encode alike: nothing to send.
		return
	}
	w.buf, w.wrote = buf, true
}

// appendStringsJSON appends json.Marshal's encoding of a []string that is
// not nil.
func appendStringsJSON(buf []byte, s []string) []byte {
	buf = append(buf, '[')
	for i, e := range s {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf, _ = appendJSONString(buf, e)
	}
	return append(buf, ']')
}

// bool diffs an omitempty bool.
func (w *objectWriter) bool(key string, a, b bool) {
	switch {
	case !b:
		if a {
			w.null(key)
		}
	case !a:
		w.buf = append(w.member(key), "true"...)
		w.wrote = true
	}
}

// boolPtr diffs an omitempty *bool.
func (w *objectWriter) boolPtr(key string, a, b *bool) {
	switch {
	case b == nil:
		if a != nil {
			w.null(key)
		}
	case a == nil || *a != *b:
		w.buf = strconv.AppendBool(w.member(key), *b)
		w.wrote = true
	}
}

// int diffs an omitempty integer.
func (w *objectWriter) int(key string, a, b int64) {
	switch {
	case b == 0:
		if a != 0 {
			w.null(key)
		}
	case a != b:
		w.buf = strconv.AppendInt(w.member(key), b, 10)
		w.wrote = true
	}
}

// time diffs an omitempty *metav1.Time by its encoding (sameTimeJSON).
func (w *objectWriter) time(key string, a, b *metav1.Time) {
	switch {
	case b == nil:
		if a != nil {
			w.null(key)
		}
	case a == nil || !sameTimeJSON(a, b):
		w.buf = appendTimeJSON(w.member(key), b)
		w.wrote = true
	}
}

// appendTimeJSON appends json.Marshal's encoding of t, metav1.Time's
// MarshalJSON: null for a zero time, else RFC 3339 in UTC to the second.
func appendTimeJSON(buf []byte, t *metav1.Time) []byte {
	if t == nil || t.IsZero() {
		return append(buf, "null"...)
	}
	buf = append(buf, '"')
	buf = t.UTC().AppendFormat(buf, time.RFC3339)
	return append(buf, '"')
}
