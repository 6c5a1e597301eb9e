package bootc

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fixtureDir holds real `bootc status` outputs copied from the bootc
// project (see its SOURCE.md), kept in the repository so that the tests
// need nothing beside it.
const fixtureDir = "testdata/bootc-status"

// fixtureFiles lists the status fixtures: every *.yaml and *.json except the
// JSON schema.
func fixtureFiles(tb testing.TB) []string {
	tb.Helper()
	entries, err := os.ReadDir(fixtureDir)
	if err != nil {
		tb.Fatalf("reading fixtures: %v", err)
	}
	var names []string
	for _, e := range entries {
		name := e.Name()
		ext := filepath.Ext(name)
		if e.IsDir() || (ext != ".yaml" && ext != ".json") || name == "host-v1.schema.json" {
			continue
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		tb.Fatalf("no fixtures in %s", fixtureDir)
	}
	return names
}

// encodeV1 writes st as v1 JSON, the way `bootc status --json` would.
func encodeV1(tb testing.TB, st *Status) []byte {
	tb.Helper()
	type ref struct {
		Image     string `json:"image"`
		Transport string `json:"transport"`
	}
	type imageStatus struct {
		Image       ref     `json:"image"`
		ImageDigest string  `json:"imageDigest"`
		Version     *string `json:"version"`
		Timestamp   *string `json:"timestamp"`
	}
	type entry struct {
		Image        *imageStatus `json:"image"`
		Pinned       bool         `json:"pinned"`
		DownloadOnly bool         `json:"downloadOnly"`
		Incompatible bool         `json:"incompatible"`
	}
	conv := func(d *Deployment) *entry {
		if d == nil {
			return nil
		}
		e := &entry{Pinned: d.Pinned, DownloadOnly: d.DownloadOnly, Incompatible: d.Incompatible}
		if d.Image != "" {
			e.Image = &imageStatus{Image: ref{d.Image, d.Transport}, ImageDigest: d.Digest}
			if d.Version != "" {
				v := d.Version
				e.Image.Version = &v
			}
			if d.Timestamp != nil {
				ts := d.Timestamp.Format(time.RFC3339Nano)
				e.Image.Timestamp = &ts
			}
		}
		return e
	}
	var specImage *ref
	if st.SpecImage != "" {
		specImage = &ref{Image: st.SpecImage, Transport: "registry"}
	}
	host := map[string]any{
		"apiVersion": APIVersionV1,
		"kind":       KindBootcHost,
		"metadata":   map[string]any{"name": "host"},
		"spec":       map[string]any{"image": specImage, "bootOrder": "default"},
		"status": map[string]any{
			"booted":         conv(st.Booted),
			"staged":         conv(st.Staged),
			"rollback":       conv(st.Rollback),
			"rollbackQueued": st.RollbackQueued,
			"isContainer":    st.IsContainer,
		},
	}
	b, err := json.Marshal(host)
	if err != nil {
		tb.Fatalf("encoding status: %v", err)
	}
	return b
}

// diffStatus describes how got differs from want, or returns "".
func diffStatus(got, want *Status) string {
	if got == nil || want == nil {
		if got != want {
			return fmt.Sprintf("got %s, want %s", formatStatus(got), formatStatus(want))
		}
		return ""
	}
	var diffs []string
	if got.SpecImage != want.SpecImage {
		diffs = append(diffs, fmt.Sprintf("SpecImage: got %q, want %q", got.SpecImage, want.SpecImage))
	}
	if got.RollbackQueued != want.RollbackQueued {
		diffs = append(diffs, fmt.Sprintf("RollbackQueued: got %v, want %v", got.RollbackQueued, want.RollbackQueued))
	}
	if got.IsContainer != want.IsContainer {
		diffs = append(diffs, fmt.Sprintf("IsContainer: got %v, want %v", got.IsContainer, want.IsContainer))
	}
	for _, d := range []struct {
		name      string
		got, want *Deployment
	}{{"Booted", got.Booted, want.Booted}, {"Staged", got.Staged, want.Staged}, {"Rollback", got.Rollback, want.Rollback}} {
		if !sameDeployment(d.got, d.want) {
			diffs = append(diffs, fmt.Sprintf("%s:\n\tgot  %s\n\twant %s", d.name, formatDeployment(d.got), formatDeployment(d.want)))
		}
	}
	return strings.Join(diffs, "\n")
}

func sameDeployment(a, b *Deployment) bool {
	if a == nil || b == nil {
		return a == b
	}
	if (a.Timestamp == nil) != (b.Timestamp == nil) || (a.Timestamp != nil && !a.Timestamp.Equal(*b.Timestamp)) {
		return false
	}
	x, y := *a, *b
	x.Timestamp, y.Timestamp = nil, nil
	return x == y
}

func formatDeployment(d *Deployment) string {
	if d == nil {
		return "nil"
	}
	ts := "nil"
	if d.Timestamp != nil {
		ts = d.Timestamp.Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("{Image:%q Transport:%q Digest:%q Version:%q Timestamp:%s Pinned:%v DownloadOnly:%v Incompatible:%v}",
		d.Image, d.Transport, d.Digest, d.Version, ts, d.Pinned, d.DownloadOnly, d.Incompatible)
}

func formatStatus(st *Status) string {
	if st == nil {
		return "nil"
	}
	return fmt.Sprintf("{SpecImage:%q Booted:%s Staged:%s Rollback:%s RollbackQueued:%v IsContainer:%v}",
		st.SpecImage, formatDeployment(st.Booted), formatDeployment(st.Staged), formatDeployment(st.Rollback), st.RollbackQueued, st.IsContainer)
}
