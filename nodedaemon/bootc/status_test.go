package bootc

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	centos     = "quay.io/centos-bootc/centos-bootc:stream9"
	someImage  = "quay.io/example/someimage:latest"
	otherImage = "quay.io/otherexample/otherimage:latest"

	digest47  = "sha256:47e5ed613a970b6574bfa954ab25bb6e85656552899aa518b5961d9645102b38"
	digest16  = "sha256:16dc2b6256b4ff0d2ec18d2dbfb06d117904010c8cf9732cdb022818cf7a7566"
	digest736 = "sha256:736b359467c9437c1ac915acaae952aad854e07eb4a16a94999a48af08c83c34"
	digestB5  = "sha256:b5bb9d8014a0f9b1d61e21e796d78dccdf1352f23cd32812f4850b878ae4944c"
)

func ts(s string) *time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return &t
}

// Deployments that recur across the fixtures.
func centosBooted() *Deployment {
	return &Deployment{Image: centos, Transport: "registry", Digest: digest47, Version: "stream9.20240807.0"}
}

func someBooted() *Deployment {
	return &Deployment{Image: someImage, Transport: "registry", Digest: digest736, Version: "nightly", Timestamp: ts("2023-09-30T19:22:16Z")}
}

func someStaged(stamp string) *Deployment {
	return &Deployment{Image: someImage, Transport: "registry", Digest: digest16, Version: "nightly", Timestamp: ts(stamp)}
}

func otherBooted() *Deployment {
	// The fixture leaves version: 20231230.1 unquoted, so YAML reads a number.
	return &Deployment{Image: otherImage, Transport: "registry", Digest: digestB5, Version: "20231230.1", Timestamp: ts("2023-12-30T16:10:11Z")}
}

func TestParseFixtures(t *testing.T) {
	pinned := centosBooted()
	pinned.Pinned = true
	withUpdate := centosBooted()
	withUpdate.Timestamp = ts("2024-08-07T12:00:00Z")
	downloadOnly := someStaged("2023-10-14T19:22:15.42Z")
	downloadOnly.DownloadOnly = true
	ostreeToBootcStaged := centosBooted()

	tests := map[string]*Status{
		"spec-booted-pinned.yaml":                 {SpecImage: centos, Booted: pinned},
		"spec-booted-update-same-digest.yaml":     {SpecImage: centos, Booted: centosBooted()},
		"spec-booted-usroverlay.yaml":             {SpecImage: someImage, Booted: someBooted()},
		"spec-booted-with-update-no-version.yaml": {SpecImage: centos, Booted: centosBooted()},
		"spec-booted-with-update.yaml":            {SpecImage: centos, Booted: withUpdate},
		"spec-only-booted.yaml":                   {SpecImage: centos, Booted: centosBooted()},
		"spec-ostree-remote.yaml":                 {SpecImage: "quay.io/fedora/fedora-coreos:stable", Booted: otherBooted()},
		// Booted from plain ostree: a deployment with no image.
		"spec-ostree-to-bootc.yaml": {SpecImage: centos, Staged: ostreeToBootcStaged, Booted: &Deployment{}},
		"spec-rfe-ostree-deployment.yaml": {
			Staged: &Deployment{Incompatible: true},
			Booted: &Deployment{},
		},
		"spec-staged-booted.yaml":        {SpecImage: someImage, Staged: someStaged("2023-10-14T19:22:15.42Z"), Booted: someBooted()},
		"spec-staged-download-only.yaml": {SpecImage: someImage, Staged: downloadOnly, Booted: someBooted()},
		"spec-staged-rollback.yaml": {
			SpecImage: someImage,
			Staged:    someStaged("2023-10-14T19:22:15Z"),
			Rollback:  someBooted(),
		},
		"spec-v1-null.json":   {},
		"spec-v1a1-orig.yaml": {SpecImage: someImage, Staged: someStaged("2023-10-14T19:22:15Z"), Booted: someBooted()},
		"spec-v1a1.yaml":      {SpecImage: otherImage, Booted: otherBooted()},
		"spec-via-local-oci.yaml": {
			SpecImage: "/var/mnt/osupdate:latest",
			Booted:    &Deployment{Image: "/var/mnt/osupdate", Transport: "oci", Digest: digest47, Version: "stream9.20240807.0"},
		},
	}

	files := fixtureFiles(t)
	for _, name := range files {
		if _, ok := tests[name]; !ok {
			t.Errorf("fixture %s has no expected status in this test", name)
		}
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(fixtureDir, name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Parse(data)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if d := diffStatus(got, want); d != "" {
				t.Errorf("Parse(%s) mismatch:\n%s", name, d)
			}
		})
	}
}

// TestParseStagedDownloadOnly spells out the fixture the unplanned-reboot
// safety rests on.
func TestParseStagedDownloadOnly(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(fixtureDir, "spec-staged-download-only.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if st.Staged == nil || !st.Staged.DownloadOnly || st.Staged.Digest != digest16 {
		t.Errorf("Staged = %s, want download-only %s", formatDeployment(st.Staged), digest16)
	}
	// The booted entry omits downloadOnly; it defaults to false.
	if st.Booted == nil || st.Booted.DownloadOnly || st.Booted.Digest != digest736 {
		t.Errorf("Booted = %s, want %s and not download-only", formatDeployment(st.Booted), digest736)
	}
}

func TestParseEncodings(t *testing.T) {
	const v1JSON = `{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost","spec":{"image":{"image":"quay.io/x/os@sha256:aa","transport":"registry"}},
"status":{"booted":{"image":{"image":{"image":"quay.io/x/os@sha256:aa","transport":"registry"},"imageDigest":"sha256:aa","version":null,"timestamp":"2026-01-02T03:04:05+01:00","architecture":"amd64"},"pinned":false,"incompatible":false,"softRebootCapable":true,"store":"ostreeContainer"},
"staged":null,"rollback":{"image":{"image":{"image":"quay.io/x/os@sha256:bb","transport":"registry"},"imageDigest":"sha256:bb","version":"41"},"pinned":false,"incompatible":false},
"rollbackQueued":true,"readOnly":false,"type":"bootcHost","otherDeployments":[],"future":{"field":1}}}`
	want := &Status{
		SpecImage:      "quay.io/x/os@sha256:aa",
		Booted:         &Deployment{Image: "quay.io/x/os@sha256:aa", Transport: "registry", Digest: "sha256:aa", Timestamp: ts("2026-01-02T02:04:05Z")},
		Rollback:       &Deployment{Image: "quay.io/x/os@sha256:bb", Transport: "registry", Digest: "sha256:bb", Version: "41"},
		RollbackQueued: true,
	}
	tests := []struct {
		name string
		data string
		want *Status
	}{
		{"v1 JSON with unknown fields", v1JSON, want},
		{"v1 JSON with leading whitespace", "\n\t " + v1JSON + "\n", want},
		{"v1alpha1 JSON from older bootc --json", strings.Replace(v1JSON, `bootc/v1"`, `bootc/v1alpha1"`, 1), want},
		{"v1 YAML", "apiVersion: org.containers.bootc/v1\nkind: BootcHost\nspec:\n  image: null\nstatus:\n  booted: null\n", &Status{}},
		{"no status at all", `{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost"}`, &Status{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.data))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if d := diffStatus(got, tt.want); d != "" {
				t.Errorf("mismatch:\n%s", d)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	const head = `{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost","status":`
	withBooted := func(booted string) string { return head + `{"booted":` + booted + `}}` }
	image := func(fields string) string {
		return withBooted(`{"image":{"image":{"image":"quay.io/x/os:1","transport":"registry"},` + fields + `},"pinned":false,"incompatible":false}`)
	}
	tests := []struct {
		name string
		data string
		want string // substring of the error
	}{
		{"empty", "", "empty"},
		{"blank", " \n\t", "empty"},
		{"truncated JSON", head + `{"booted":{"image":`, "truncated"},
		{"truncated after apiVersion", `{"apiVersion":"org.containers.bootc/v1"`, "truncated"},
		{"JSON syntax", `{"apiVersion": org}`, "at byte 16"},
		{"trailing garbage", `{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost"} x`, "after top-level value"},
		{"YAML syntax", "apiVersion: [org\nkind: BootcHost\n", "parsing bootc status YAML"},
		{"no apiVersion", `{"kind":"BootcHost"}`, "no apiVersion"},
		{"wrong apiVersion JSON", `{"apiVersion":"org.containers.bootc/v2","kind":"BootcHost"}`, `unsupported apiVersion "org.containers.bootc/v2"`},
		{"wrong apiVersion YAML", "apiVersion: v1\nkind: Pod\n", `unsupported apiVersion "v1"`},
		{"wrong kind", `{"apiVersion":"org.containers.bootc/v1","kind":"Pod"}`, `unsupported kind "Pod"`},
		{"missing kind", `{"apiVersion":"org.containers.bootc/v1"}`, `unsupported kind ""`},
		{"apiVersion not a string", `{"apiVersion":1,"kind":"BootcHost"}`, "field apiVersion: got number, want string"},
		{"top level not an object", `[1, 2]`, "field (top level): got array, want object"},
		{"status not an object", head + `"ok"}`, "field status: got string, want object"},
		{"booted not an object", withBooted(`"yes"`), "field status.booted: got string, want object"},
		{"pinned not a boolean", withBooted(`{"pinned":"yes"}`), "field status.booted.pinned: got string, want boolean"},
		{"rollbackQueued not a boolean", head + `{"rollbackQueued":1}}`, "field status.rollbackQueued: got number, want boolean"},
		{"digest not a string", image(`"imageDigest":42`), "field status.booted.image.imageDigest: got number, want string"},
		{"version an object", image(`"imageDigest":"sha256:aa","version":{"v":1}`), "field status.booted.image.version: got object, want string"},
		{"version a boolean", image(`"imageDigest":"sha256:aa","version":true`), "field status.booted.image.version: got boolean, want string"},
		{"timestamp not RFC 3339", image(`"imageDigest":"sha256:aa","timestamp":"yesterday"`), "status.booted.image.timestamp is not an RFC 3339 time"},
		{"digest missing", image(`"version":"1"`), "status.booted.image.imageDigest is missing"},
		{"image reference missing", withBooted(`{"image":{"imageDigest":"sha256:aa"},"pinned":false,"incompatible":false}`), "status.booted.image.image.image is missing"},
		{"staged named in errors", head + `{"staged":{"image":{"imageDigest":"sha256:aa"}}}}`, "status.staged.image.image.image is missing"},
		{"rollback named in errors", head + `{"rollback":{"incompatible":"no"}}}`, "field status.rollback.incompatible"},
		{"YAML wrong type", "apiVersion: org.containers.bootc/v1alpha1\nkind: BootcHost\nstatus:\n  booted: [1]\n", "field status.booted: got array, want object"},
		{"too large", `{"apiVersion":"` + strings.Repeat("x", MaxStatusSize) + `"}`, "more than the"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.data))
			if err == nil {
				t.Fatalf("Parse succeeded with %s, want an error containing %q", formatStatus(got), tt.want)
			}
			if got != nil {
				t.Errorf("Parse returned %s with its error", formatStatus(got))
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q, want it to contain %q", err, tt.want)
			}
			// Errors speak of status fields and JSON types, not Go types.
			if msg := err.Error(); strings.Contains(msg, "wire") || strings.Contains(msg, "looseString") {
				t.Errorf("error %q leaks Go type names", msg)
			}
		})
	}
}

func TestParseDoesNotKeepInput(t *testing.T) {
	data := []byte(`{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost","spec":{"image":{"image":"quay.io/x/os:1","transport":"registry"}}}`)
	st, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	copy(data, bytes.Repeat([]byte("z"), len(data)))
	if got, want := st.SpecImage, "quay.io/x/os:1"; got != want {
		t.Errorf("SpecImage after overwriting the input = %q, want %q", got, want)
	}
}
