package scenario

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"time"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// decoder fills Go values from a YAML node tree, strictly: every unknown
// key, wrong type, malformed scalar and broken tag rule is reported with
// its path and line, and decoding goes on to find the rest.
type decoder struct {
	pos *positions
	// budget bounds the nodes visited, as aliases can make a small
	// document expand exponentially.
	budget int
	spent  bool
}

// maxDecodeNodes bounds the nodes a document may expand to.
const maxDecodeNodes = 200000

const (
	tagStr       = "!!str"
	tagInt       = "!!int"
	tagFloat     = "!!float"
	tagBool      = "!!bool"
	tagNull      = "!!null"
	tagTimestamp = "!!timestamp"
)

var percentRe = regexp.MustCompile(`^(100|[1-9]?[0-9])%$`)

// describe names a node's kind and value for an error message.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case tagNull:
			return "null"
		case tagStr:
			return fmt.Sprintf("string %q", n.Value)
		case tagInt:
			return "integer " + n.Value
		case tagFloat:
			return "number " + n.Value
		case tagBool:
			return "boolean " + n.Value
		case tagTimestamp:
			return "timestamp " + n.Value
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an unsupported YAML node"
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == tagNull
}

func isScalar(n *yaml.Node, tags ...string) bool {
	if n.Kind != yaml.ScalarNode {
		return false
	}
	tag := n.ShortTag()
	for _, t := range tags {
		if tag == t {
			return true
		}
	}
	return false
}

// value decodes n into v. path is v's field path and line the line to
// report it at (the key's line for a mapping value).
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string, line int) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if d.budget--; d.budget < 0 {
		if !d.spent {
			d.spent = true
			d.pos.errorAt(line, path, "the document expands to more than %d values (through aliases?)", maxDecodeNodes)
		}
		return
	}
	d.pos.record(path, line, n)
	t := v.Type()
	switch t {
	case durationType, signedDuration:
		parse := parseDuration
		if t == signedDuration {
			parse = parseSignedDuration // clockSkew.offset: ahead or behind
		}
		if dur, msg := parse(n); msg != "" {
			d.pos.errorAt(line, path, "%s", msg)
		} else {
			v.SetInt(int64(dur))
		}
		return
	case metaDurationType:
		if dur, msg := parseDuration(n); msg != "" {
			d.pos.errorAt(line, path, "%s", msg)
		} else {
			v.Set(reflect.ValueOf(metav1.Duration{Duration: dur}))
		}
		return
	case neverDurationType:
		if isScalar(n, tagStr) && n.Value == "Never" {
			v.Set(reflect.ValueOf(NeverDuration{Never: true}))
			return
		}
		if dur, msg := parseDuration(n); msg != "" {
			d.pos.errorAt(line, path, "%s or Never", msg)
		} else {
			v.Set(reflect.ValueOf(NeverDuration{Duration: dur}))
		}
		return
	case timeType:
		if !isScalar(n, tagStr, tagTimestamp) {
			d.pos.errorAt(line, path, "want an RFC 3339 time such as 2026-01-05T00:00:00Z, got %s", describe(n))
			return
		}
		tm, err := time.Parse(time.RFC3339, n.Value)
		if err != nil {
			d.pos.errorAt(line, path, "invalid time %q: want RFC 3339 such as 2026-01-05T00:00:00Z", n.Value)
			return
		}
		v.Set(reflect.ValueOf(tm.UTC()))
		return
	case quantityType:
		if !isScalar(n, tagStr, tagInt, tagFloat) {
			d.pos.errorAt(line, path, "want a quantity such as 1Gi or 500m, got %s", describe(n))
			return
		}
		q, err := resource.ParseQuantity(n.Value)
		if err != nil {
			d.pos.errorAt(line, path, "invalid quantity %q: want a Kubernetes quantity such as 1Gi, 1.5G or 500m", n.Value)
			return
		}
		if q.Sign() < 0 {
			d.pos.errorAt(line, path, "invalid quantity %q: must not be negative", n.Value)
			return
		}
		v.Set(reflect.ValueOf(q))
		return
	case intOrStringType:
		const want = "want an integer >= 0 or a percentage from 0% to 100%"
		switch {
		case isScalar(n, tagInt):
			var i int64
			if err := n.Decode(&i); err != nil || i < 0 || i > math.MaxInt32 {
				d.pos.errorAt(line, path, "invalid value %s: %s", n.Value, want)
				return
			}
			v.Set(reflect.ValueOf(intstr.FromInt32(int32(i))))
		case isScalar(n, tagStr) && percentRe.MatchString(n.Value):
			v.Set(reflect.ValueOf(intstr.FromString(n.Value)))
		case isScalar(n, tagStr) && n.Value != "" && strings.Trim(n.Value, "0123456789") == "":
			// Karpenter's budgets write counts as strings ("1"); here a
			// count is a number.
			d.pos.errorAt(line, path, "invalid value %s: %s (write a count without quotes: %s)", describe(n), want, n.Value)
		default:
			d.pos.errorAt(line, path, "invalid value %s: %s", describe(n), want)
		}
		return
	}

	if t.Kind() == reflect.Pointer {
		nv := reflect.New(t.Elem())
		d.value(n, nv.Elem(), path, line)
		v.Set(nv)
		return
	}
	if t.Kind() == reflect.Struct {
		if sh, ok := v.Addr().Interface().(shorthand); ok && n.Kind == yaml.ScalarNode && !isNull(n) {
			if msg := sh.fromScalar(n); msg != "" {
				d.pos.errorAt(line, path, "%s", msg)
			}
			return
		}
		d.structValue(n, v, path, line)
		return
	}

	switch t.Kind() {
	case reflect.Map:
		d.mapValue(n, v, path, line)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.pos.errorAt(line, path, "want a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.value(item, s.Index(i), joinIndex(path, i), item.Line)
		}
		v.Set(s)
	case reflect.String:
		if !isScalar(n, tagStr) {
			hint := ""
			if n.Kind == yaml.ScalarNode && !isNull(n) {
				hint = " (quote it to make it a string)"
			}
			d.pos.errorAt(line, path, "want a string, got %s%s", describe(n), hint)
			return
		}
		if vals := enumOf(t); vals != nil && !contains(vals, n.Value) {
			d.pos.errorAt(line, path, "invalid value %q: want one of %s%s", n.Value, strings.Join(vals, ", "), suggest(n.Value, vals))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		var b bool
		if !isScalar(n, tagBool) || n.Decode(&b) != nil {
			d.pos.errorAt(line, path, "want true or false, got %s", describe(n))
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var i int64
		if !isScalar(n, tagInt) || n.Decode(&i) != nil {
			d.pos.errorAt(line, path, "want an integer, got %s", describe(n))
			return
		}
		if v.OverflowInt(i) {
			d.pos.errorAt(line, path, "integer %s is out of range", n.Value)
			return
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		var u uint64
		if !isScalar(n, tagInt) {
			d.pos.errorAt(line, path, "want an integer >= 0, got %s", describe(n))
			return
		}
		if strings.HasPrefix(n.Value, "-") || n.Decode(&u) != nil || v.OverflowUint(u) {
			d.pos.errorAt(line, path, "invalid value %s: want an integer from 0 to %d", n.Value, uint64(math.MaxUint64)>>(64-t.Bits()))
			return
		}
		v.SetUint(u)
	case reflect.Float32, reflect.Float64:
		var f float64
		if !isScalar(n, tagFloat, tagInt) || n.Decode(&f) != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			d.pos.errorAt(line, path, "want a number, got %s", describe(n))
			return
		}
		v.SetFloat(f)
	default:
		panic(fmt.Sprintf("scenario: cannot decode into %s at %s", t, path))
	}
}

// parseDuration reads a non-negative Go duration string.
func parseDuration(n *yaml.Node) (time.Duration, string) {
	dur, msg := parseSignedDuration(n)
	if msg != "" {
		return 0, msg
	}
	if dur < 0 {
		return 0, fmt.Sprintf("invalid duration %q: must not be negative", n.Value)
	}
	return dur, ""
}

// parseSignedDuration reads a Go duration string, which may be negative.
func parseSignedDuration(n *yaml.Node) (time.Duration, string) {
	const want = "want a Go duration such as 90s, 10m or 1h30m"
	if !isScalar(n, tagStr) {
		return 0, fmt.Sprintf("%s, got %s", want, describe(n))
	}
	dur, err := time.ParseDuration(n.Value)
	if err != nil {
		return 0, fmt.Sprintf("invalid duration %q: %s", n.Value, want)
	}
	return dur, ""
}

func contains(vals []string, s string) bool {
	for _, v := range vals {
		if v == s {
			return true
		}
	}
	return false
}

func (d *decoder) mapValue(n *yaml.Node, v reflect.Value, path string, line int) {
	if n.Kind != yaml.MappingNode {
		d.pos.errorAt(line, path, "want a mapping, got %s", describe(n))
		return
	}
	t := v.Type()
	m := reflect.MakeMapWithSize(t, len(n.Content)/2)
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if !isScalar(k, tagStr) {
			d.pos.errorAt(k.Line, path, "want string keys, got %s", describe(k))
			continue
		}
		kpath := joinKey(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			d.pos.errorAt(k.Line, kpath, "duplicate key %q (first at line %d)", k.Value, first)
			continue
		}
		seen[k.Value] = k.Line
		elem := reflect.New(t.Elem()).Elem()
		d.value(val, elem, kpath, k.Line)
		m.SetMapIndex(reflect.ValueOf(k.Value).Convert(t.Key()), elem)
	}
	v.Set(m)
}

func (d *decoder) structValue(n *yaml.Node, v reflect.Value, path string, line int) {
	if n.Kind != yaml.MappingNode {
		hint := ""
		if isNull(n) {
			hint = " (write {} for an empty mapping)"
		}
		d.pos.errorAt(line, path, "want a mapping, got %s%s", describe(n), hint)
		return
	}
	fields := fieldsOf(v.Type())
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if !isScalar(k, tagStr) {
			d.pos.errorAt(k.Line, path, "want string keys, got %s", describe(k))
			continue
		}
		key := k.Value
		fpath := joinKey(path, key)
		if first, dup := seen[key]; dup {
			d.pos.errorAt(k.Line, fpath, "duplicate key %q (first at line %d)", key, first)
			continue
		}
		seen[key] = k.Line
		f := fieldNamed(fields, key)
		if f == nil {
			d.pos.errorAt(k.Line, fpath, "unknown field %q%s", key, suggest(key, fieldNames(fields)))
			continue
		}
		nerr := len(d.pos.errs)
		fv := v.FieldByIndex(f.index)
		d.value(val, fv, fpath, k.Line)
		if len(d.pos.errs) == nerr {
			d.checkRules(f, fv, fpath, k.Line)
		}
	}
	for _, f := range fields {
		if _, ok := seen[f.name]; ok {
			continue
		}
		fpath := joinKey(path, f.name)
		switch {
		case f.required:
			d.pos.errorAt(n.Line, fpath, "required field is missing")
		case f.hasDef:
			setDefault(f, v.FieldByIndex(f.index), fpath)
		default:
			setDefaults(v.FieldByIndex(f.index))
		}
	}
	for _, group := range oneOfGroups(fields) {
		var given []string
		for _, name := range group {
			if _, ok := seen[name]; ok {
				given = append(given, name)
			}
		}
		switch len(given) {
		case 0:
			d.pos.errorAt(line, path, "one of %s is required", strings.Join(group, ", "))
		case 1:
		default:
			d.pos.errorAt(seen[given[1]], joinKey(path, given[1]), "only one of %s may be given, got %s", strings.Join(group, ", "), strings.Join(given, " and "))
		}
	}
}

// checkRules applies a field's pattern, minimum, maximum and minItems tags
// to its decoded value.
func (d *decoder) checkRules(f *fieldInfo, v reflect.Value, path string, line int) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if f.pattern != "" && v.Kind() == reflect.String {
		if p := patterns[f.pattern]; !p.re.MatchString(v.String()) {
			d.pos.errorAt(line, path, "invalid value %q: %s", v.String(), p.msg)
		}
	}
	var num float64
	var isNum bool
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		num, isNum = float64(v.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		num, isNum = float64(v.Uint()), true
	case reflect.Float32, reflect.Float64:
		num, isNum = v.Float(), true
	}
	if isNum && f.min != nil && num < *f.min {
		d.pos.errorAt(line, path, "invalid value %v: must be at least %v", num, *f.min)
	}
	if isNum && f.max != nil && num > *f.max {
		d.pos.errorAt(line, path, "invalid value %v: must be at most %v", num, *f.max)
	}
	if f.minItems >= 0 && v.Kind() == reflect.Slice && v.Len() < f.minItems {
		d.pos.errorAt(line, path, "has %d items, want at least %d", v.Len(), f.minItems)
	}
}

var defaultCache sync.Map // default YAML text -> *yaml.Node

// setDefault decodes a field's default into v. Defaults are part of the
// program, so a bad one panics; TestDefaults decodes them all.
func setDefault(f fieldInfo, v reflect.Value, path string) {
	var node *yaml.Node
	if c, ok := defaultCache.Load(f.def); ok {
		node = c.(*yaml.Node)
	} else {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(f.def), &doc); err != nil || len(doc.Content) != 1 {
			panic(fmt.Sprintf("scenario: bad default %q of %s.%s: %v", f.def, f.owner.Name(), f.goName, err))
		}
		node = doc.Content[0]
		defaultCache.Store(f.def, node)
	}
	sub := &decoder{pos: newPositions("default", nil), budget: maxDecodeNodes}
	sub.value(node, v, path, 0)
	sub.checkRules(&f, v, path, 0)
	if len(sub.pos.errs) > 0 {
		panic(fmt.Sprintf("scenario: bad default %q of %s.%s: %v", f.def, f.owner.Name(), f.goName, sub.pos.errs))
	}
}

// setDefaults applies the defaults of an absent struct's fields, and of
// the structs inside it.
func setDefaults(v reflect.Value) {
	if v.Kind() != reflect.Struct || isLeaf(v.Type()) {
		return
	}
	for _, f := range fieldsOf(v.Type()) {
		fv := v.FieldByIndex(f.index)
		if f.hasDef {
			setDefault(f, fv, "")
		} else {
			setDefaults(fv)
		}
	}
}

// fromScalar reads the shorthand "90s" for {dist: fixed, value: 90s}.
func (d *Distribution) fromScalar(n *yaml.Node) string {
	dur, msg := parseDuration(n)
	if msg != "" {
		return msg + " or a distribution {dist: ...}"
	}
	*d = Distribution{Dist: DistFixed, Value: dur}
	return ""
}

// fromScalar reads the shorthand n for {min: n, max: n}.
func (c *CountRange) fromScalar(n *yaml.Node) string {
	var i int
	if !isScalar(n, tagInt) || n.Decode(&i) != nil || i < 0 {
		return fmt.Sprintf("want an integer >= 0 or {min, max}, got %s", describe(n))
	}
	*c = CountRange{Min: i, Max: &i}
	return ""
}
