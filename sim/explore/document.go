package explore

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// document is a scenario file's node tree, edited to make the variants
// that exploration runs and writes.
type document struct {
	file string
	root *yaml.Node // the top-level mapping
}

func parseDocument(file string, data []byte) (*document, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: want one YAML document holding a mapping", file)
	}
	return &document{file: file, root: doc.Content[0]}, nil
}

// variant is how a run's document differs from the original.
type variant struct {
	name     string
	seed     uint64
	limit    time.Duration
	schedule Schedule
	// counts overrides nodeGroups[i].count, replicas workloads[i].replicas.
	counts   map[int]int
	replicas map[int]int
	header   []string
}

// render returns the variant's scenario file: the original with the
// variant's name, seed and limit, the schedule's entries added to events
// and faults, its expectations cut to the invariants (the schedule's
// faults may legitimately break a timing expectation), and no negative
// controls (they are about the original).
func (d *document) render(v variant) ([]byte, error) {
	root := clone(d.root)
	if v.name != "" {
		setScalar(root, "name", v.name)
	}
	setScalar(root, "seed", strconv.FormatUint(v.seed, 10))
	if v.limit > 0 {
		setScalar(root, "limit", v.limit.String())
	}
	deleteKey(root, "negativeControls")
	if exp := get(root, "expect"); exp != nil && exp.Kind == yaml.MappingNode {
		var keep []*yaml.Node
		for i := 0; i+1 < len(exp.Content); i += 2 {
			if exp.Content[i].Value == "invariants" {
				keep = append(keep, exp.Content[i], exp.Content[i+1])
			}
		}
		exp.Content = keep
		if len(keep) == 0 {
			deleteKey(root, "expect")
		}
	}
	for i, n := range v.counts {
		if err := setIndexed(root, "nodeGroups", i, "count", strconv.Itoa(n)); err != nil {
			return nil, err
		}
	}
	for i, n := range v.replicas {
		if err := setIndexed(root, "workloads", i, "replicas", strconv.Itoa(n)); err != nil {
			return nil, err
		}
	}
	for _, it := range v.schedule {
		for _, e := range it.Entries {
			if e.Section == Setting {
				setScalar(root, e.Key, fmt.Sprint(e.Body["value"]))
				continue
			}
			seq := get(root, string(e.Section))
			if seq == nil || seq.Kind != yaml.SequenceNode {
				deleteKey(root, string(e.Section))
				seq = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
				root.Content = append(root.Content, scalar(string(e.Section)), seq)
			}
			var body yaml.Node
			if err := body.Encode(bodyValue(e.Body)); err != nil {
				return nil, fmt.Errorf("encoding %s: %w", e.Key, err)
			}
			setFlow(&body)
			key, when := scalar("at"), scalar(e.At.String())
			if e.Until > 0 {
				key = scalar("window")
				when = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle, Content: []*yaml.Node{
					scalar("from"), scalar(e.At.String()), scalar("to"), scalar(e.Until.String())}}
			}
			key.HeadComment = "explore: " + string(it.Category)
			m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{
				key, when, scalar(e.Key), &body,
			}}
			seq.Content = append(seq.Content, m)
		}
	}
	var buf bytes.Buffer
	for _, h := range v.header {
		buf.WriteString("# " + h + "\n")
	}
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("encoding %s: %w", d.file, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding %s: %w", d.file, err)
	}
	return buf.Bytes(), nil
}

func scalar(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func get(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func setScalar(m *yaml.Node, key, value string) {
	v := &yaml.Node{Kind: yaml.ScalarNode, Value: value}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, scalar(key), v)
}

func deleteKey(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

func setIndexed(root *yaml.Node, list string, i int, key, value string) error {
	seq := get(root, list)
	if seq == nil || seq.Kind != yaml.SequenceNode || i >= len(seq.Content) || seq.Content[i].Kind != yaml.MappingNode {
		return fmt.Errorf("%s[%d] not found", list, i)
	}
	setScalar(seq.Content[i], key, value)
	return nil
}

// clone copies a node tree deeply (aliases point into the copy's anchors
// only when they were inside the cloned tree; scenario files have none
// that cross the top level).
func clone(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, x := range n.Content {
		c.Content[i] = clone(x)
	}
	return &c
}

// dnsLabel makes s a valid scenario name: lower case, at most 63
// characters, no leading or trailing '-'.
func dnsLabel(s string) string {
	s = strings.ToLower(s)
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.Trim(s, "-")
}

// bodyValue is what an entry's body encodes as: the body, or its one
// value under the key "" (a whole node copied from the document, as
// createPool takes a pool), cloned so that styling it leaves the document
// alone.
func bodyValue(body map[string]any) any {
	v, ok := body[""]
	if !ok {
		return body
	}
	if n, ok := v.(*yaml.Node); ok {
		return clone(n)
	}
	return v
}
