package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"unicode"

	yaml "go.yaml.in/yaml/v3"
)

// SchemaID is the $id of the scenario JSON Schema.
const SchemaID = "https://bootroll.dev/schemas/scenario.json"

const (
	durationSchemaPattern = `^(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`
	signedSchemaPattern   = `^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`
	quantitySchemaPattern = `^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`
	percentSchemaPattern  = `^(100|[1-9]?[0-9])%$`
)

// Schema returns the JSON Schema (draft 2020-12) of the scenario format,
// generated from the Go types: descriptions from their doc comments,
// additionalProperties false, required keys, enums, defaults, and patterns
// for durations and quantities. scenarios/schema.json is its output. The
// schema cannot say everything the loader checks (references between
// sections, distribution parameters, limits): Parse is the authority.
func Schema() ([]byte, error) {
	return schemaWith(docs)
}

func schemaWith(docs map[string]string) ([]byte, error) {
	g := &schemaGen{docs: docs, defs: map[string]any{}}
	root := g.object(scenarioType)
	root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	root["$id"] = SchemaID
	root["title"] = "bootroll scenario"
	root["$defs"] = g.defs
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("encoding the scenario schema: %w", err)
	}
	return buf.Bytes(), nil
}

type schemaGen struct {
	docs map[string]string
	defs map[string]any
}

func durationSchema() map[string]any {
	return map[string]any{"type": "string", "pattern": durationSchemaPattern}
}

func (g *schemaGen) typeSchema(t reflect.Type) map[string]any {
	switch t {
	case durationType, metaDurationType:
		return durationSchema()
	case signedDuration:
		return map[string]any{"type": "string", "pattern": signedSchemaPattern}
	case neverDurationType:
		return map[string]any{"anyOf": []any{map[string]any{"const": "Never"}, durationSchema()}}
	case timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case quantityType:
		return map[string]any{"anyOf": []any{
			map[string]any{"type": "number", "minimum": 0},
			map[string]any{"type": "string", "pattern": quantitySchemaPattern},
		}}
	case intOrStringType:
		return map[string]any{"anyOf": []any{
			map[string]any{"type": "integer", "minimum": 0, "maximum": math.MaxInt32},
			map[string]any{"type": "string", "pattern": percentSchemaPattern},
		}}
	}
	if vals := enumOf(t); vals != nil {
		return map[string]any{"type": "string", "enum": vals}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.typeSchema(t.Elem())
	case reflect.Struct:
		ref := g.ref(t)
		if sh, ok := reflect.New(t).Interface().(shorthand); ok {
			return map[string]any{"anyOf": []any{sh.scalarSchema(), ref}}
		}
		return ref
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.typeSchema(t.Elem())}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": g.typeSchema(t.Elem())}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Int32:
		return map[string]any{"type": "integer", "minimum": math.MinInt32, "maximum": math.MaxInt32}
	case reflect.Uint64:
		return map[string]any{"type": "integer", "minimum": 0}
	case reflect.Float64:
		return map[string]any{"type": "number"}
	}
	panic(fmt.Sprintf("scenario: no schema for %s", t))
}

// ref puts a struct type's schema in $defs and refers to it.
func (g *schemaGen) ref(t reflect.Type) map[string]any {
	if _, ok := g.defs[t.Name()]; !ok {
		g.defs[t.Name()] = nil // breaks cycles
		g.defs[t.Name()] = g.object(t)
	}
	return map[string]any{"$ref": "#/$defs/" + t.Name()}
}

func (g *schemaGen) object(t reflect.Type) map[string]any {
	fs := fieldsOf(t)
	props := map[string]any{}
	required := []string{}
	for _, f := range fs {
		s := g.typeSchema(f.typ)
		if d := fieldDesc(g.docs, f); d != "" {
			s["description"] = d
		}
		if f.hasDef {
			var v any
			if err := yaml.Unmarshal([]byte(f.def), &v); err != nil {
				panic(fmt.Sprintf("scenario: bad default %q of %s.%s: %v", f.def, f.owner.Name(), f.goName, err))
			}
			s["default"] = v
		}
		if f.pattern != "" {
			s["pattern"] = patterns[f.pattern].re.String()
		}
		if f.min != nil {
			s["minimum"] = *f.min
		}
		if f.max != nil {
			s["maximum"] = *f.max
		}
		if f.minItems >= 0 {
			s["minItems"] = f.minItems
		}
		if f.required {
			required = append(required, f.name)
		}
		props[f.name] = s
	}
	obj := map[string]any{"type": "object", "additionalProperties": false, "properties": props}
	if d := g.docs[t.Name()]; d != "" {
		obj["description"] = d
	}
	if len(required) > 0 {
		obj["required"] = required
	}
	var groups []any
	for _, group := range oneOfGroups(fs) {
		var alts []any
		for _, name := range group {
			alts = append(alts, map[string]any{"required": []string{name}})
		}
		groups = append(groups, map[string]any{"oneOf": alts})
	}
	switch len(groups) {
	case 0:
	case 1:
		obj["oneOf"] = groups[0].(map[string]any)["oneOf"]
	default:
		obj["allOf"] = groups
	}
	return obj
}

// fieldDesc is a field's doc comment with its Go name replaced by its YAML
// key.
func fieldDesc(docs map[string]string, f fieldInfo) string {
	d := docs[f.owner.Name()+"."+f.goName]
	if rest, ok := strings.CutPrefix(d, f.goName); ok && (rest == "" || !unicode.IsLetter(rune(rest[0]))) {
		return f.name + rest
	}
	return d
}

func (*Distribution) scalarSchema() map[string]any { return durationSchema() }

func (*CountRange) scalarSchema() map[string]any {
	return map[string]any{"type": "integer", "minimum": 0}
}
