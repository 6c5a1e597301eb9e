package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Load reads the scenario file at path and decodes it strictly: see Parse.
func Load(path string) (*Scenario, error) {
	return LoadWithSets(path, nil)
}

// LoadWithSets reads the scenario file at path, applies the --set overrides
// and decodes the result strictly: see ParseWithSets.
func LoadWithSets(path string, sets []string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading scenario: %w", err)
	}
	return ParseWithSets(path, data, sets)
}

// Parse decodes a scenario document strictly. Every unknown field, wrong
// type and impossible value is reported; the error is then an Errors with
// one "FILE:LINE: FIELD: message" a line, and no Scenario is returned.
// Defaults are applied to fields the document leaves out. filename is used
// in messages only.
func Parse(filename string, data []byte) (*Scenario, error) {
	return ParseWithSets(filename, data, nil)
}

// ParseWithSets applies --set overrides ("path=value", see ApplySets) to the
// document's node tree and then decodes it as Parse does, so an override is
// validated like the file; errors caused by an override say so.
func ParseWithSets(filename string, data []byte, sets []string) (*Scenario, error) {
	root, err := parseDocument(filename, data)
	if err != nil {
		return nil, err
	}
	origins := map[*yaml.Node]string{}
	pos := newPositions(filename, origins)
	for _, expr := range sets {
		if msg := applySet(root, expr, 0, origins); msg != "" {
			pos.errorAt(0, "--set "+expr, "%s", msg)
		}
	}
	if err := pos.result(); err != nil {
		return nil, err
	}
	return decodeDocument(filename, root, origins, true)
}

// ApplySets applies --set overrides to a scenario document and returns the
// new document, re-encoded. Each override is "path=value": path is a field
// path such as bootroll.pools[0].maxUnavailable (keys joined by dots, [i] for
// list items, ["key"] for keys with dots or slashes) and value is YAML (a
// scalar such as 20%, true, 3 or 10m, or a flow collection such as [a, b] or
// {min: 1}). A key that the format has but the document leaves out is
// created; a key the format does not have, or an index past the end of a
// list, is an error naming the path. The result is not validated: Parse it.
func ApplySets(filename string, data []byte, sets []string) ([]byte, error) {
	root, err := parseDocument(filename, data)
	if err != nil {
		return nil, err
	}
	pos := newPositions(filename, nil)
	for _, expr := range sets {
		if msg := applySet(root, expr, 0, map[*yaml.Node]string{}); msg != "" {
			pos.errorAt(0, "--set "+expr, "%s", msg)
		}
	}
	if err := pos.result(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("encoding %s: %w", filename, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding %s: %w", filename, err)
	}
	return buf.Bytes(), nil
}

var yamlErrLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseDocument parses exactly one YAML document into a node tree.
func parseDocument(filename string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, Errors{{File: filename, Msg: "empty scenario file"}}
		}
		return nil, yamlError(filename, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, Errors{{File: filename, Line: extra.Line, Msg: "a scenario file holds one YAML document; found another"}}
	} else if !errors.Is(err, io.EOF) {
		return nil, yamlError(filename, err)
	}
	return &doc, nil
}

func yamlError(filename string, err error) error {
	msg := err.Error()
	if m := yamlErrLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		if strings.HasPrefix(m[2], "did not find expected") {
			// yaml.v3 reports parser (not scanner) errors with a
			// 0-based line.
			line++
		}
		return Errors{{File: filename, Line: line, Msg: "invalid YAML: " + m[2]}}
	}
	return Errors{{File: filename, Msg: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}}
}

// decodeDocument decodes and validates a node tree. With controls, the
// negative controls' overrides are tried too.
func decodeDocument(filename string, doc *yaml.Node, origins map[*yaml.Node]string, controls bool) (*Scenario, error) {
	pos := newPositions(filename, origins)
	root := doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	s := &Scenario{}
	d := &decoder{pos: pos, budget: maxDecodeNodes}
	d.value(root, reflect.ValueOf(s).Elem(), "", root.Line)
	if !d.spent {
		validate(s, pos)
	}
	if len(pos.errs) == 0 && controls {
		checkControls(s, doc, origins, pos)
	}
	if err := pos.result(); err != nil {
		return nil, err
	}
	derive(s)
	s.File = filename
	return s, nil
}

// checkControls applies each negative control's overrides to a copy of the
// document and requires the result to be a valid scenario, so a broken
// control fails at load time rather than passing by accident.
func checkControls(s *Scenario, doc *yaml.Node, origins map[*yaml.Node]string, pos *positions) {
	for i, nc := range s.NegativeControls {
		cpath := joinIndex("negativeControls", i)
		cp, copied := cloneNode(doc)
		corigins := map[*yaml.Node]string{}
		for n, e := range origins {
			if c, ok := copied[n]; ok {
				corigins[c] = e
			}
		}
		ok := true
		for j, expr := range nc.Set {
			spath := joinIndex(joinKey(cpath, "set"), j)
			if msg := applySet(cp, expr, pos.lineOf(spath), corigins); msg != "" {
				pos.errorf(spath, "%s", msg)
				ok = false
			}
		}
		if !ok {
			continue
		}
		if _, err := decodeDocument(pos.file, cp, corigins, false); err != nil {
			var es Errors
			errors.As(err, &es)
			msgs := make([]string, len(es))
			for k, e := range es {
				msgs[k] = e.Field + ": " + e.Msg
			}
			pos.errorf(joinKey(cpath, "set"), "the overrides make the scenario invalid: %s", strings.Join(msgs, "; "))
		}
	}
}

// cloneNode deep-copies a node tree, keeping aliases pointing into the
// copy; it also returns the map from old to new nodes.
func cloneNode(n *yaml.Node) (*yaml.Node, map[*yaml.Node]*yaml.Node) {
	copied := map[*yaml.Node]*yaml.Node{}
	var walk func(*yaml.Node) *yaml.Node
	walk = func(n *yaml.Node) *yaml.Node {
		if n == nil {
			return nil
		}
		if c, ok := copied[n]; ok {
			return c
		}
		c := *n
		copied[n] = &c
		c.Content = make([]*yaml.Node, len(n.Content))
		for i, ch := range n.Content {
			c.Content[i] = walk(ch)
		}
		c.Alias = walk(n.Alias)
		return &c
	}
	return walk(n), copied
}
