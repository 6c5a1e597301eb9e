package scenario

import (
	"fmt"
	"reflect"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// applySet applies one "path=value" override to a document tree, walking
// the Go types beside the nodes so that only paths the format has are
// accepted. Nodes it adds get line (or, when line is 0, the line of the key
// they replace or of the mapping they go into) and are recorded in origins.
// It returns what is wrong, or "".
func applySet(doc *yaml.Node, expr string, line int, origins map[*yaml.Node]string) string {
	path, value, ok := strings.Cut(expr, "=")
	if !ok {
		return "want path=value"
	}
	path = strings.TrimSpace(path)
	segs, err := parsePath(path)
	if err != nil {
		return fmt.Sprintf("invalid path %q: %v", path, err)
	}
	var vdoc yaml.Node
	if err := yaml.Unmarshal([]byte(value), &vdoc); err != nil {
		return fmt.Sprintf("invalid value %q: %v", value, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	val := &yaml.Node{Kind: yaml.ScalarNode, Tag: tagNull}
	if len(vdoc.Content) == 1 {
		val = vdoc.Content[0]
	}

	cur := doc
	if cur.Kind == yaml.DocumentNode {
		if len(cur.Content) == 0 {
			cur.Content = []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map", Line: 1}}
		}
		cur = cur.Content[0]
	}
	at := func(l int) int {
		if line > 0 {
			return line
		}
		return l
	}
	t := scenarioType
	for i, seg := range segs {
		here := formatPath(segs[:i])
		if here == "" {
			here = "the scenario"
		}
		last := i == len(segs)-1
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		for cur.Kind == yaml.AliasNode && cur.Alias != nil {
			cur = cur.Alias
		}

		if seg.isIndex {
			if t.Kind() != reflect.Slice {
				return fmt.Sprintf("%s is not a list", here)
			}
			if cur.Kind != yaml.SequenceNode {
				if isNull(cur) {
					return fmt.Sprintf("index %d out of range: %s has 0 items", seg.index, here)
				}
				return fmt.Sprintf("%s is %s in the document, not a list", here, describe(cur))
			}
			if seg.index >= len(cur.Content) {
				return fmt.Sprintf("index %d out of range: %s has %d items", seg.index, here, len(cur.Content))
			}
			t = t.Elem()
			if last {
				setLines(val, at(cur.Content[seg.index].Line))
				origins[val] = expr
				cur.Content[seg.index] = val
				return ""
			}
			cur = cur.Content[seg.index]
			continue
		}

		switch {
		case t.Kind() == reflect.Map:
			t = t.Elem()
		case t.Kind() == reflect.Struct && !isLeaf(t):
			fs := fieldsOf(t)
			f := fieldNamed(fs, seg.key)
			if f == nil {
				return fmt.Sprintf("unknown field %q in %s%s", seg.key, here, suggest(seg.key, fieldNames(fs)))
			}
			t = f.typ
		default:
			return fmt.Sprintf("%s is a single value and has no field %q", here, seg.key)
		}
		if isNull(cur) {
			*cur = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: cur.Line, Column: cur.Column}
		}
		if cur.Kind != yaml.MappingNode {
			return fmt.Sprintf("%s is %s in the document, not a mapping; set it whole", here, describe(cur))
		}
		vi := -1
		for j := 0; j+1 < len(cur.Content); j += 2 {
			if cur.Content[j].Value == seg.key {
				vi = j + 1
			}
		}
		if last {
			if vi >= 0 {
				setLines(val, at(cur.Content[vi-1].Line))
				cur.Content[vi] = val
			} else {
				setLines(val, at(cur.Line))
				cur.Content = append(cur.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: tagStr, Value: seg.key, Line: at(cur.Line)}, val)
			}
			origins[val] = expr
			return ""
		}
		if vi < 0 {
			if next := segs[i+1]; next.isIndex {
				return fmt.Sprintf("index %d out of range: %s has 0 items", next.index, formatPath(segs[:i+1]))
			}
			m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: at(cur.Line)}
			origins[m] = expr
			cur.Content = append(cur.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: tagStr, Value: seg.key, Line: at(cur.Line)}, m)
			vi = len(cur.Content) - 1
		}
		cur = cur.Content[vi]
	}
	return ""
}

// setLines gives a node tree one line number, so errors in a value that
// came from --set point at the place it went.
func setLines(n *yaml.Node, line int) {
	n.Line = line
	for _, c := range n.Content {
		setLines(c, line)
	}
}
