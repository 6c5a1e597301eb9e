package apiserver

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// mergePatch applies the JSON merge patch patch to doc, a valid JSON object,
// with the semantics of jsonpatch.MergePatch (gopkg.in/evanphx/json-patch.v4):
// the result decodes to the same object. It works on the raw bytes and only
// splits the parts of doc the patch reaches; untouched values are copied as
// they are. ok is false when patch is not a valid JSON object, in which case
// the caller must use jsonpatch.MergePatch, which knows the errors to give.
// When keep is not nil, the result leaves out the top-level members of doc
// that the patch does not name and keep rejects.
func mergePatch(doc, patch []byte, keep func(key string) bool) (out []byte, ok bool) {
	p := bytes.TrimLeft(patch, " \t\r\n")
	if len(p) == 0 || p[0] != '{' || !validJSON(patch) {
		return nil, false
	}
	d := bytes.TrimLeft(doc, " \t\r\n")
	if len(d) == 0 || d[0] != '{' {
		return nil, false
	}
	buf := make([]byte, 0, len(doc)+len(patch))
	return mergeObjects(buf, d, p, keep), true
}

// member is one key and raw value of a JSON object.
type member struct {
	key string
	val []byte
}

// members splits the valid JSON object obj into its members, the last of
// duplicate keys winning, sorted by key as encoding/json orders map keys.
func members(obj []byte) []member {
	ms := splitMembers(obj)
	slices.SortStableFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
	// Keep the last of equal keys.
	out := ms[:0]
	for j, m := range ms {
		if j+1 < len(ms) && ms[j+1].key == m.key {
			continue
		}
		out = append(out, m)
	}
	return out
}

// splitMembers splits the valid JSON object obj into its members, in order,
// duplicate keys included.
func splitMembers(obj []byte) []member {
	var ms []member
	i := skipWS(obj, 1)
	for i < len(obj) && obj[i] != '}' {
		kEnd := skipString(obj, i)
		key := unquote(obj[i:kEnd])
		i = skipWS(obj, kEnd)
		i = skipWS(obj, i+1) // ':'
		vEnd := skipValue(obj, i)
		ms = append(ms, member{key, obj[i:vEnd]})
		i = skipWS(obj, vEnd)
		if i < len(obj) && obj[i] == ',' {
			i = skipWS(obj, i+1)
		}
	}
	return ms
}

// mergeObjects appends the merge of patch into cur, both valid JSON objects,
// leaving out the members of cur the patch does not name and keep, if not
// nil, rejects.
func mergeObjects(buf, cur, patch []byte, keep func(string) bool) []byte {
	cm, pm := members(cur), members(patch)
	buf = append(buf, '{')
	first := true
	emit := func(key string) {
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = appendKey(buf, key)
	}
	i, j := 0, 0
	for i < len(cm) || j < len(pm) {
		switch {
		case j >= len(pm) || (i < len(cm) && cm[i].key < pm[j].key):
			if keep == nil || keep(cm[i].key) {
				emit(cm[i].key)
				buf = append(buf, cm[i].val...)
			}
			i++
		case i >= len(cm) || pm[j].key < cm[i].key:
			if !isNull(pm[j].val) {
				emit(pm[j].key)
				buf = mergeValue(buf, nil, pm[j].val)
			}
			j++
		default:
			if !isNull(pm[j].val) {
				emit(pm[j].key)
				buf = mergeValue(buf, cm[i].val, pm[j].val)
			}
			i++
			j++
		}
	}
	return append(buf, '}')
}

// mergeValue appends the merge of the patch value v, not null, into the
// current value cur, nil when the document has none.
func mergeValue(buf, cur, v []byte) []byte {
	switch {
	case cur == nil || isNull(cur) || cur[0] != '{':
		return pruneNulls(buf, v)
	case v[0] == '{':
		return mergeObjects(buf, cur, v, nil)
	}
	return append(buf, v...)
}

// pruneNulls appends v with the null members of its objects removed,
// recursively, as jsonpatch does for a value that replaces another: nulls
// in arrays stay.
func pruneNulls(buf, v []byte) []byte {
	switch v[0] {
	case '{':
		buf = append(buf, '{')
		first := true
		for _, m := range members(v) {
			if isNull(m.val) {
				continue
			}
			if !first {
				buf = append(buf, ',')
			}
			first = false
			buf = appendKey(buf, m.key)
			buf = pruneNulls(buf, m.val)
		}
		return append(buf, '}')
	case '[':
		buf = append(buf, '[')
		i := skipWS(v, 1)
		first := true
		for i < len(v) && v[i] != ']' {
			end := skipValue(v, i)
			if !first {
				buf = append(buf, ',')
			}
			first = false
			buf = pruneNulls(buf, v[i:end])
			i = skipWS(v, end)
			if i < len(v) && v[i] == ',' {
				i = skipWS(v, i+1)
			}
		}
		return append(buf, ']')
	}
	return append(buf, v...)
}

func isNull(v []byte) bool { return len(v) == 4 && string(v) == "null" }

func appendKey(buf []byte, key string) []byte {
	plain := true
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			plain = false
			break
		}
	}
	if plain {
		buf = append(buf, '"')
		buf = append(buf, key...)
		buf = append(buf, '"', ':')
		return buf
	}
	b, _ := json.Marshal(key)
	buf = append(buf, b...)
	return append(buf, ':')
}

// unquote decodes the JSON string s.
func unquote(s []byte) string {
	if bytes.IndexByte(s, '\\') < 0 {
		return string(s[1 : len(s)-1])
	}
	var out string
	_ = json.Unmarshal(s, &out)
	return out
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		c := b[i]
		if c > ' ' {
			return i // not whitespace, by one comparison
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the valid JSON string starting at i:
// after the first quote that an even number of backslashes precedes (an
// odd number escapes it).
func skipString(b []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b)
		}
		j += k
		n := 0
		for m := j - 1; m > i && b[m] == '\\'; m-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
}

// skipValue returns the index after the valid JSON value starting at i.
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
	}
	return i
}
