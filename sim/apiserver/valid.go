package apiserver

import (
	"encoding/binary"
	"math/bits"
)

// validJSON reports whether b is one valid JSON value with optional
// surrounding whitespace: what encoding/json.Valid reports, including its
// nesting limit, in one pass without the state machine's per-byte calls
// (json.Valid took a quarter of the merge-patch fast path; every patch of
// a twin run goes through it). Like json.Valid it accepts any byte of 0x20
// or more in a string: invalid UTF-8 decodes to U+FFFD, it is not an
// error. TestValidJSONAgreesWithEncodingJSON and FuzzValidJSON compare
// the two.
func validJSON(b []byte) bool {
	return validJSONEnds(b, nil)
}

// validJSONEnds is validJSON that also records, when ends is not nil (of
// len(b) at least), where each string, object and array of b ends: for
// one that starts (with its quote or bracket) at b[i], ends[i] is the
// index after it. The other entries of ends are left as they were. What
// it records is complete only when it reports b valid.
func validJSONEnds(b []byte, ends []int) bool {
	v := validator{b: b, ends: ends}
	v.ws()
	if !v.value(0) {
		return false
	}
	v.ws()
	return v.i == len(b)
}

// maxValidDepth is encoding/json's maxNestingDepth: deeper documents are
// invalid to it.
const maxValidDepth = 10000

type validator struct {
	b []byte
	i int
	// ends, when not nil, gets the end of each string and container
	// read (validJSONEnds).
	ends []int
}

func (v *validator) ws() {
	for v.i < len(v.b) {
		c := v.b[v.i]
		if c > ' ' {
			// Not whitespace, by one comparison: what follows most
			// tokens of a compact document.
			return
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			v.i++
		default:
			return
		}
	}
}

// value reads one value at nesting depth depth (the containers around it).
func (v *validator) value(depth int) bool {
	if v.i >= len(v.b) {
		return false
	}
	switch c := v.b[v.i]; {
	case c == '{':
		return v.container(true, depth)
	case c == '[':
		return v.container(false, depth)
	case c == '"':
		return v.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return v.number()
	case c == 't':
		return v.literal("true")
	case c == 'f':
		return v.literal("false")
	case c == 'n':
		return v.literal("null")
	}
	return false
}

// container reads an object (object) or an array at depth, v.b[v.i] being
// its opening bracket.
func (v *validator) container(object bool, depth int) bool {
	if depth+1 > maxValidDepth {
		return false
	}
	end := byte(']')
	if object {
		end = '}'
	}
	start := v.i
	v.i++
	v.ws()
	if v.i < len(v.b) && v.b[v.i] == end {
		v.i++
		v.ended(start)
		return true
	}
	for {
		if object {
			if v.i >= len(v.b) || v.b[v.i] != '"' || !v.str() {
				return false
			}
			v.ws()
			if v.i >= len(v.b) || v.b[v.i] != ':' {
				return false
			}
			v.i++
			v.ws()
		}
		if !v.value(depth + 1) {
			return false
		}
		v.ws()
		if v.i >= len(v.b) {
			return false
		}
		switch v.b[v.i] {
		case ',':
			v.i++
			v.ws()
		case end:
			v.i++
			v.ended(start)
			return true
		default:
			return false
		}
	}
}

func (v *validator) literal(word string) bool {
	if len(v.b)-v.i < len(word) || string(v.b[v.i:v.i+len(word)]) != word {
		return false
	}
	v.i += len(word)
	return true
}

// plainInString marks the bytes a string holds as they are: not a quote,
// a backslash or a control character.
var plainInString = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// mayEndPlain reports whether any of the eight bytes of x (a word of a
// string's bytes) is not plain (plainInString): a quote, a backslash or a
// byte below 0x20. The tests are the exact has-zero-byte bit tricks: a
// byte of 0x80 or above is never flagged by them, and is plain.
func mayEndPlain(x uint64) bool { return notPlain(x) != 0 }

// notPlain returns the flags of mayEndPlain: the high bit of a byte of x
// is set for a byte that may not be plain. The lowest byte flagged is
// exactly the first that is not plain (the bytes below it borrow nothing
// from it): flags above it may be wrong.
func notPlain(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(y uint64) uint64 { return (y - ones) & ^y & highs }
	return (x-ones*0x20)&^x&highs | zero(x^(ones*'"')) | zero(x^(ones*'\\'))
}

// ended records, with ends, that the string or container that starts at
// start ends at v.i.
func (v *validator) ended(start int) {
	if v.ends != nil {
		v.ends[start] = v.i
	}
}

// str reads a string, v.b[v.i] being its opening quote.
func (v *validator) str() bool {
	start := v.i
	v.i++
	for v.i < len(v.b) {
		// Eight plain bytes at a time, up to the first that is not
		// plain, then byte by byte.
		for v.i+8 <= len(v.b) {
			if m := notPlain(binary.LittleEndian.Uint64(v.b[v.i:])); m != 0 {
				v.i += bits.TrailingZeros64(m) / 8
				break
			}
			v.i += 8
		}
		for v.i < len(v.b) && plainInString[v.b[v.i]] {
			v.i++
		}
		if v.i >= len(v.b) {
			return false
		}
		c := v.b[v.i]
		switch {
		case c == '"':
			v.i++
			v.ended(start)
			return true
		case c < 0x20:
			return false
		case c == '\\':
			v.i++
			if v.i >= len(v.b) {
				return false
			}
			switch v.b[v.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				v.i++
			case 'u':
				if len(v.b)-v.i < 5 {
					return false
				}
				for _, h := range v.b[v.i+1 : v.i+5] {
					if !isHex(h) {
						return false
					}
				}
				v.i += 5
			default:
				return false
			}
		default:
			v.i++
		}
	}
	return false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (v *validator) number() bool {
	if v.b[v.i] == '-' {
		v.i++
	}
	if v.i >= len(v.b) {
		return false
	}
	switch c := v.b[v.i]; {
	case c == '0':
		v.i++
	case c >= '1' && c <= '9':
		v.digits()
	default:
		return false
	}
	if v.i < len(v.b) && v.b[v.i] == '.' {
		v.i++
		if v.digits() == 0 {
			return false
		}
	}
	if v.i < len(v.b) && (v.b[v.i] == 'e' || v.b[v.i] == 'E') {
		v.i++
		if v.i < len(v.b) && (v.b[v.i] == '+' || v.b[v.i] == '-') {
			v.i++
		}
		if v.digits() == 0 {
			return false
		}
	}
	return true
}

func (v *validator) digits() int {
	start := v.i
	for v.i < len(v.b) && v.b[v.i] >= '0' && v.b[v.i] <= '9' {
		v.i++
	}
	return v.i - start
}
