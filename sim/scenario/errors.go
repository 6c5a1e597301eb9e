package scenario

import (
	"fmt"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// FieldError is one thing wrong with a scenario, at a line of its file.
type FieldError struct {
	// File is the scenario file.
	File string
	// Line is the 1-based line in File; 0 when the error has no line (a
	// --set expression given on the command line).
	Line int
	// Field is the dotted path of the field, e.g. bootroll.pools[0].image.
	Field string
	// Msg says what is wrong, with the offending value.
	Msg string
}

// Error formats the error as FILE:LINE: FIELD: message.
func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every error found in a scenario, ordered by line. Its Error is
// one FieldError a line.
type Errors []*FieldError

// Error joins the errors with newlines.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the errors for errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// positions remembers where each field of a decoded document came from, so
// that later checks can report errors at the right line, and collects the
// errors.
type positions struct {
	file string
	// lines maps a field path present in the document to its line.
	lines map[string]int
	// origins maps value nodes that --set put into the tree to the set
	// expression; sets maps field paths decoded from them to the expression.
	origins map[*yaml.Node]string
	sets    map[string]string
	errs    Errors
}

func newPositions(file string, origins map[*yaml.Node]string) *positions {
	return &positions{file: file, lines: map[string]int{}, origins: origins, sets: map[string]string{}}
}

// record notes that path was given in the document at line by node n.
func (p *positions) record(path string, line int, n *yaml.Node) {
	p.lines[path] = line
	if e, ok := p.origins[n]; ok {
		p.sets[path] = e
	}
}

// has reports whether path was given in the document (not defaulted).
func (p *positions) has(path string) bool {
	_, ok := p.lines[path]
	return ok
}

// lineOf is the line of path, or of its nearest ancestor present in the
// document.
func (p *positions) lineOf(path string) int {
	for {
		if l, ok := p.lines[path]; ok {
			return l
		}
		if path == "" {
			return 0
		}
		path = parentPath(path)
	}
}

// errorf reports an error at the line of path.
func (p *positions) errorf(path, format string, args ...any) {
	p.errorAt(p.lineOf(path), path, format, args...)
}

// errorAt reports an error at a given line.
func (p *positions) errorAt(line int, path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	for q := path; ; q = parentPath(q) {
		if e, ok := p.sets[q]; ok {
			msg += fmt.Sprintf(" (from --set %s)", e)
			break
		}
		if q == "" {
			break
		}
	}
	p.errs = append(p.errs, &FieldError{File: p.file, Line: line, Field: path, Msg: msg})
}

// maxErrors bounds the errors reported for one document.
const maxErrors = 100

// result returns the errors sorted by line, at most maxErrors of them, or
// nil.
func (p *positions) result() error {
	if len(p.errs) == 0 {
		return nil
	}
	es := slices.Clone(p.errs)
	slices.SortStableFunc(es, func(a, b *FieldError) int { return a.Line - b.Line })
	if len(es) > maxErrors {
		more := len(es) - maxErrors
		es = append(es[:maxErrors], &FieldError{File: p.file, Msg: fmt.Sprintf("and %d more errors", more)})
	}
	return es
}
