package scenario

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// This file reads the rules out of the scenario types' struct tags; the
// decoder, the --set resolver and the schema generator share them.

var (
	durationType      = reflect.TypeFor[time.Duration]()
	metaDurationType  = reflect.TypeFor[metav1.Duration]() // the API's durations, written as time.Duration is
	timeType          = reflect.TypeFor[time.Time]()
	quantityType      = reflect.TypeFor[resource.Quantity]()
	intOrStringType   = reflect.TypeFor[intstr.IntOrString]()
	neverDurationType = reflect.TypeFor[NeverDuration]()
	signedDuration    = reflect.TypeFor[SignedDuration]()
	scenarioType      = reflect.TypeFor[Scenario]()
)

// isLeaf reports whether values of t are written as one scalar even though
// t may be a struct.
func isLeaf(t reflect.Type) bool {
	switch t {
	case durationType, metaDurationType, timeType, quantityType, intOrStringType, neverDurationType, signedDuration:
		return true
	}
	return t.Kind() != reflect.Struct && t.Kind() != reflect.Map && t.Kind() != reflect.Slice && t.Kind() != reflect.Pointer
}

// enum is implemented by string types with a closed set of values.
type enum interface{ enumValues() []string }

// enumOf returns the values of an enum type, or nil.
func enumOf(t reflect.Type) []string {
	if vals, ok := apiEnums[t]; ok {
		return vals
	}
	if t.Kind() == reflect.String && t.Implements(reflect.TypeFor[enum]()) {
		return reflect.Zero(t).Interface().(enum).enumValues()
	}
	return nil
}

// shorthand is implemented (on the pointer) by struct types that may also
// be written as a scalar.
type shorthand interface {
	// fromScalar sets the value from a scalar node; it returns a message
	// saying what is wrong, or "".
	fromScalar(n *yaml.Node) string
	// scalarSchema is the JSON Schema of the scalar form.
	scalarSchema() map[string]any
}

// pattern is a named string pattern used by the pattern tag.
type pattern struct {
	re  *regexp.Regexp
	msg string
}

const (
	repoPattern = `[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*`
	tagPattern  = `:[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`
	digPattern  = `sha256:[a-f0-9]{64}`
)

var patterns = map[string]pattern{
	"dnsLabel": {regexp.MustCompile(`^[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?$`),
		"want a DNS label: at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit"},
	"shortName": {regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9_.]{0,62}$`),
		"want a short name: letters, digits, '-', '_' and '.', starting with a letter or digit"},
	"imageRef": {regexp.MustCompile(`^` + repoPattern + `(?:(?:` + tagPattern + `)|(?:@` + digPattern + `))?$`),
		"want an image reference, registry/repo:tag or registry/repo@sha256:<64 hex>"},
	"digestRef": {regexp.MustCompile(`^` + repoPattern + `@` + digPattern + `$`),
		"want a digest reference, registry/repo@sha256:<64 hex>"},
	"digest": {regexp.MustCompile(`^` + digPattern + `$`),
		"want sha256:<64 lower-case hex digits>"},
	"timeOfDay": {regexp.MustCompile(`^(?:[01][0-9]|2[0-3]):[0-5][0-9]$`),
		"want a time of day, HH:MM"},
}

// fieldInfo is one YAML key of a struct type and its rules.
type fieldInfo struct {
	name     string       // YAML key
	goName   string       // Go field name
	owner    reflect.Type // struct that declares the field, for docs
	index    []int
	typ      reflect.Type
	required bool
	def      string // default, YAML text
	hasDef   bool
	pattern  string
	min, max *float64
	minItems int
	oneOf    string
}

var fieldCache sync.Map // reflect.Type -> []fieldInfo

// fieldsOf lists the YAML keys of a struct type in declaration order,
// flattening embedded structs.
func fieldsOf(t reflect.Type) []fieldInfo {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.([]fieldInfo)
	}
	var fs []fieldInfo
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if tag == "-" || !sf.IsExported() {
			continue
		}
		if sf.Anonymous && name == "" && sf.Type.Kind() == reflect.Struct {
			for _, f := range fieldsOf(sf.Type) {
				f.index = append([]int{i}, f.index...)
				fs = append(fs, f)
			}
			continue
		}
		if name == "" {
			panic(fmt.Sprintf("scenario: %s.%s has no json name", t.Name(), sf.Name))
		}
		f := fieldInfo{name: name, goName: sf.Name, owner: t, index: []int{i}, typ: sf.Type, minItems: -1}
		sf.Tag += " " + apiTags[t][sf.Name]
		f.required = sf.Tag.Get("required") == "true"
		f.def, f.hasDef = sf.Tag.Lookup("default")
		f.pattern = sf.Tag.Get("pattern")
		if f.pattern != "" {
			if _, ok := patterns[f.pattern]; !ok {
				panic(fmt.Sprintf("scenario: %s.%s: unknown pattern %q", t.Name(), sf.Name, f.pattern))
			}
		}
		f.min = floatTag(t, sf, "minimum")
		f.max = floatTag(t, sf, "maximum")
		if s, ok := sf.Tag.Lookup("minItems"); ok {
			n, err := strconv.Atoi(s)
			if err != nil {
				panic(fmt.Sprintf("scenario: %s.%s: bad minItems %q", t.Name(), sf.Name, s))
			}
			f.minItems = n
		}
		f.oneOf = sf.Tag.Get("oneOf")
		fs = append(fs, f)
	}
	fieldCache.Store(t, fs)
	return fs
}

func floatTag(t reflect.Type, sf reflect.StructField, key string) *float64 {
	s, ok := sf.Tag.Lookup(key)
	if !ok {
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic(fmt.Sprintf("scenario: %s.%s: bad %s %q", t.Name(), sf.Name, key, s))
	}
	return &v
}

// fieldNamed finds the field with YAML key name.
func fieldNamed(fs []fieldInfo, name string) *fieldInfo {
	for i := range fs {
		if fs[i].name == name {
			return &fs[i]
		}
	}
	return nil
}

// oneOfGroups lists the oneOf groups of a struct's fields in order, each
// with its members' keys.
func oneOfGroups(fs []fieldInfo) [][]string {
	var order []string
	groups := map[string][]string{}
	for _, f := range fs {
		if f.oneOf == "" {
			continue
		}
		if _, ok := groups[f.oneOf]; !ok {
			order = append(order, f.oneOf)
		}
		groups[f.oneOf] = append(groups[f.oneOf], f.name)
	}
	out := make([][]string, len(order))
	for i, g := range order {
		out[i] = groups[g]
	}
	return out
}

// suggest returns ` (did you mean "x"?)` for the candidate closest to s, or
// "".
func suggest(s string, candidates []string) string {
	best, bestD := "", math.MaxInt
	for _, c := range candidates {
		ls, lc := strings.ToLower(s), strings.ToLower(c)
		d := editDistance(ls, lc)
		close := d <= 2 || len(ls) >= 4 && (strings.HasPrefix(lc, ls) || strings.HasPrefix(ls, lc))
		if close && d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func fieldNames(fs []fieldInfo) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.name
	}
	return out
}

// Action returns the YAML key of the event's action (setPoolImage,
// deleteNode, ...) and its value, read through the same field table the
// decoder uses; "" when none is set.
func (e *Event) Action() (name string, value any) {
	v := reflect.ValueOf(e).Elem()
	for _, f := range fieldsOf(v.Type()) {
		if f.oneOf != "action" {
			continue
		}
		if fv := v.FieldByIndex(f.index); !fv.IsNil() {
			return f.name, fv.Interface()
		}
	}
	return "", nil
}
