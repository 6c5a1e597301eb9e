// Package bootc is the node daemon's adapter to the bootc CLI on the host:
// it parses `bootc status`, stages and applies OS images, rolls back and
// reboots. The commands it runs, and why, are described in docs/bootc.md.
//
// Parse is pure. Client reaches the host only through its Runner, so tests
// and the twin can substitute one; ExecRunner and ReadBootID are the edges.
package bootc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// API versions and kind of the BootcHost object printed by `bootc status`.
const (
	APIVersionV1       = "org.containers.bootc/v1"
	APIVersionV1Alpha1 = "org.containers.bootc/v1alpha1"
	KindBootcHost      = "BootcHost"
)

// MaxStatusSize bounds the input Parse accepts. Real status output is a few
// kilobytes; anything near this size is not bootc talking.
const MaxStatusSize = 4 << 20

// Deployment is one bootc deployment.
type Deployment struct {
	Image        string     // image reference (spec image.image), e.g. quay.io/x/y:tag
	Transport    string     // registry, oci, containers-storage, ...
	Digest       string     // imageDigest "sha256:..." ("" for ostree-only deployments)
	Version      string     // image version label, "" when unset
	Timestamp    *time.Time // image build time, nil when unset
	Pinned       bool
	DownloadOnly bool // staged but locked: a reboot will not apply it
	Incompatible bool // has origin changes bootc does not understand
}

// Status is the parsed output of `bootc status`.
type Status struct {
	SpecImage                string // spec.image.image, "" when null
	Booted, Staged, Rollback *Deployment
	RollbackQueued           bool // the rollback deployment is the next boot
	IsContainer              bool
}

// Parse parses `bootc status` output in either format: v1 JSON (apiVersion
// org.containers.bootc/v1) or v1alpha1 YAML (older bootc). Either API
// version is accepted in either encoding. An unknown apiVersion or kind is
// an error naming it. Parse never panics on any input.
func Parse(data []byte) (*Status, error) {
	if len(data) > MaxStatusSize {
		return nil, fmt.Errorf("bootc status output is %d bytes, more than the %d accepted", len(data), MaxStatusSize)
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, errors.New("bootc status output is empty")
	}
	format, js := "JSON", trimmed
	if trimmed[0] != '{' {
		// YAML goes through JSON so that both formats share one decoder
		// and one set of error messages.
		format = "YAML"
		var err error
		if js, err = yaml.YAMLToJSON(trimmed); err != nil {
			return nil, fmt.Errorf("parsing bootc status YAML: %w", err)
		}
	}
	var host wireHost
	if err := json.Unmarshal(js, &host); err != nil {
		return nil, fmt.Errorf("parsing bootc status %s: %w", format, describeJSONError(err))
	}
	return host.status()
}

// wireHost mirrors the BootcHost object (see host-v1.schema.json). Fields
// that bootroll does not use are left out and ignored.
type wireHost struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Spec       *wireSpec   `json:"spec"`
	Status     *wireStatus `json:"status"`
}

type wireSpec struct {
	Image *wireImageRef `json:"image"`
}

type wireImageRef struct {
	Image     string `json:"image"`
	Transport string `json:"transport"`
}

type wireStatus struct {
	Staged         *wireEntry `json:"staged"`
	Booted         *wireEntry `json:"booted"`
	Rollback       *wireEntry `json:"rollback"`
	RollbackQueued bool       `json:"rollbackQueued"`
	IsContainer    bool       `json:"isContainer"`
}

type wireEntry struct {
	Image        *wireImageStatus `json:"image"`
	Pinned       bool             `json:"pinned"`
	DownloadOnly bool             `json:"downloadOnly"`
	Incompatible bool             `json:"incompatible"`
}

type wireImageStatus struct {
	Image       *wireImageRef `json:"image"`
	ImageDigest string        `json:"imageDigest"`
	Version     looseString   `json:"version"`
	Timestamp   *string       `json:"timestamp"`
}

func (h *wireHost) status() (*Status, error) {
	switch {
	case h.APIVersion == "":
		return nil, errors.New("bootc status has no apiVersion")
	case h.APIVersion != APIVersionV1 && h.APIVersion != APIVersionV1Alpha1:
		return nil, fmt.Errorf("bootc status has unsupported apiVersion %q (want %s or %s)", h.APIVersion, APIVersionV1, APIVersionV1Alpha1)
	case h.Kind != KindBootcHost:
		return nil, fmt.Errorf("bootc status has unsupported kind %q (want %s)", h.Kind, KindBootcHost)
	}
	st := &Status{}
	if h.Spec != nil && h.Spec.Image != nil {
		st.SpecImage = h.Spec.Image.Image
	}
	if h.Status == nil {
		return st, nil
	}
	st.RollbackQueued = h.Status.RollbackQueued
	st.IsContainer = h.Status.IsContainer
	var err error
	if st.Booted, err = h.Status.Booted.deployment("status.booted"); err != nil {
		return nil, err
	}
	if st.Staged, err = h.Status.Staged.deployment("status.staged"); err != nil {
		return nil, err
	}
	if st.Rollback, err = h.Status.Rollback.deployment("status.rollback"); err != nil {
		return nil, err
	}
	return st, nil
}

// deployment converts one boot entry; path names it in errors.
func (e *wireEntry) deployment(path string) (*Deployment, error) {
	if e == nil {
		return nil, nil
	}
	d := &Deployment{Pinned: e.Pinned, DownloadOnly: e.DownloadOnly, Incompatible: e.Incompatible}
	img := e.Image
	if img == nil {
		return d, nil // an ostree deployment that bootc did not create
	}
	if img.Image == nil || img.Image.Image == "" {
		return nil, fmt.Errorf("bootc status field %s.image.image.image is missing", path)
	}
	if img.ImageDigest == "" {
		return nil, fmt.Errorf("bootc status field %s.image.imageDigest is missing", path)
	}
	d.Image = img.Image.Image
	d.Transport = img.Image.Transport
	d.Digest = img.ImageDigest
	d.Version = img.Version.s
	if img.Timestamp != nil {
		ts, err := time.Parse(time.RFC3339Nano, *img.Timestamp)
		if err != nil {
			return nil, fmt.Errorf("bootc status field %s.image.timestamp is not an RFC 3339 time: %w", path, err)
		}
		d.Timestamp = &ts
	}
	return d, nil
}

// looseString is a string that may also be written as a bare number. The
// version label is a string, but hand-written or older YAML leaves values
// such as 20231230.1 unquoted, and YAML reads those as numbers. The number's
// shortest decimal form is kept, so "1.10" written bare reads as "1.1".
type looseString struct{ s string }

func (l *looseString) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) == 0:
		return nil
	case b[0] == 'n': // null
		l.s = ""
		return nil
	case b[0] == '"':
		return json.Unmarshal(b, &l.s)
	case b[0] == '-' || (b[0] >= '0' && b[0] <= '9'):
		l.s = string(b)
		return nil
	}
	// Returning an UnmarshalTypeError lets encoding/json add the field path.
	kind := "boolean"
	switch b[0] {
	case '{':
		kind = "object"
	case '[':
		kind = "array"
	}
	return &json.UnmarshalTypeError{Value: kind, Type: reflect.TypeFor[looseString]()}
}

// describeJSONError turns encoding/json errors, which name Go types, into
// messages that name the status field and the JSON types involved.
func describeJSONError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		if field == "" {
			field = "(top level)"
		}
		return fmt.Errorf("field %s: got %s, want %s", field, firstWord(typeErr.Value), jsonKind(typeErr.Type))
	}
	var syntaxErr *json.SyntaxError
	if errors.As(err, &syntaxErr) {
		if strings.Contains(err.Error(), "unexpected end of JSON input") {
			return fmt.Errorf("input ends after %d bytes, before the object is closed (truncated?): %w", syntaxErr.Offset, err)
		}
		return fmt.Errorf("at byte %d: %w", syntaxErr.Offset, err)
	}
	return err
}

// firstWord drops the value encoding/json sometimes appends ("number 1.5").
func firstWord(s string) string {
	if i := strings.IndexByte(s, ' '); i >= 0 {
		return s[:i]
	}
	return s
}

func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[looseString]() {
		return "string"
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "number"
	}
	return t.String()
}
