package bootc

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// fakeRunner records every command and answers from a script keyed by the
// command line. A command line with several answers gets them in order; the
// last one repeats.
type fakeRunner struct {
	script map[string][]answer
	calls  []string
}

type answer struct {
	stdout string
	err    error
}

func (f *fakeRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	line := commandLine(name, args)
	f.calls = append(f.calls, line)
	answers := f.script[line]
	if len(answers) == 0 {
		return nil, &CommandError{Err: errors.New("exit status 127"), Stderr: "fake: no answer scripted for " + line}
	}
	a := answers[0]
	if len(answers) > 1 {
		f.script[line] = answers[1:]
	}
	return []byte(a.stdout), a.err
}

// failed mimics what ExecRunner returns for a command that exits 1.
func failed(stderr string) error {
	return &CommandError{Err: errors.New("exit status 1"), Stderr: stderr}
}

const (
	statusCmd   = "bootc status --json --format-version 1"
	imageV2     = "quay.io/example/os@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	digestV2    = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	imageV1     = "quay.io/example/os@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	registryErr = "error: Switching: Pulling: Creating importer: failed to invoke method OpenImage: reading manifest sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb in quay.io/example/os: manifest unknown"
	oldBootcErr = "error: unexpected argument '--download-only' found\n\n  tip: to pass '--download-only' as a value, use '-- --download-only'\n\nUsage: bootc switch [OPTIONS] <TARGET>\n\nFor more information, try '--help'."
)

func TestClient(t *testing.T) {
	booted := &Deployment{Image: imageV1, Transport: "registry", Digest: "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}
	stagedLocked := &Deployment{Image: imageV2, Transport: "registry", Digest: digestV2, DownloadOnly: true}
	stagedUnlocked := &Deployment{Image: imageV2, Transport: "registry", Digest: digestV2}
	stagedOther := &Deployment{Image: "quay.io/example/os@sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc", Transport: "registry", Digest: "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc", DownloadOnly: true}
	// A tag reference that bootc resolved to the digest we asked for.
	stagedByTag := &Deployment{Image: "quay.io/example/os:v2", Transport: "registry", Digest: digestV2, DownloadOnly: true}
	rollback := &Deployment{Image: "quay.io/example/os@sha256:0000000000000000000000000000000000000000000000000000000000000000", Transport: "registry", Digest: "sha256:0000000000000000000000000000000000000000000000000000000000000000"}

	status := func(st *Status) []answer { return []answer{{stdout: string(encodeV1(t, st))}} }

	tests := []struct {
		name      string
		do        func(context.Context, *Client) error
		script    map[string][]answer
		wantCalls []string
		wantErr   []string // substrings of the error; none means success
		wantIs    error
	}{
		{
			name:      "Status",
			do:        func(ctx context.Context, c *Client) error { _, err := c.Status(ctx); return err },
			script:    map[string][]answer{statusCmd: status(&Status{Booted: booted})},
			wantCalls: []string{statusCmd},
		},
		{
			name:      "Status failure quotes stderr",
			do:        func(ctx context.Context, c *Client) error { _, err := c.Status(ctx); return err },
			script:    map[string][]answer{statusCmd: {{err: failed("error: Status: Opening sysroot: No such file or directory")}}},
			wantCalls: []string{statusCmd},
			wantErr:   []string{"reading bootc status", statusCmd, "exit status 1", "Opening sysroot: No such file or directory"},
		},
		{
			name:      "Status with bad output",
			do:        func(ctx context.Context, c *Client) error { _, err := c.Status(ctx); return err },
			script:    map[string][]answer{statusCmd: {{stdout: `{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost","status":{`}}},
			wantCalls: []string{statusCmd},
			wantErr:   []string{"reading bootc status", "output of " + statusCmd, "truncated"},
		},
		{
			name: "Stage",
			do:   func(ctx context.Context, c *Client) error { return c.Stage(ctx, imageV2) },
			script: map[string][]answer{
				"bootc switch --download-only -- " + imageV2: {{}},
				statusCmd: status(&Status{SpecImage: imageV2, Booted: booted, Staged: stagedLocked}),
			},
			wantCalls: []string{"bootc switch --download-only -- " + imageV2, statusCmd},
		},
		{
			name:      "Stage on bootc without switch --download-only",
			do:        func(ctx context.Context, c *Client) error { return c.Stage(ctx, imageV2) },
			script:    map[string][]answer{"bootc switch --download-only -- " + imageV2: {{err: &CommandError{Err: errors.New("exit status 2"), Stderr: boundStderr([]byte(oldBootcErr))}}}},
			wantCalls: []string{"bootc switch --download-only -- " + imageV2},
			wantErr:   []string{"staging " + imageV2, "1.16.10", "unexpected argument '--download-only' found"},
			wantIs:    ErrDownloadOnlyUnsupported,
		},
		{
			name:      "Stage pull failure quotes stderr",
			do:        func(ctx context.Context, c *Client) error { return c.Stage(ctx, imageV2) },
			script:    map[string][]answer{"bootc switch --download-only -- " + imageV2: {{err: failed(registryErr)}}},
			wantCalls: []string{"bootc switch --download-only -- " + imageV2},
			wantErr:   []string{"staging " + imageV2, "bootc switch --download-only -- " + imageV2, "exit status 1", "manifest unknown"},
		},
		{
			name: "Stage left unlocked",
			do:   func(ctx context.Context, c *Client) error { return c.Stage(ctx, imageV2) },
			script: map[string][]answer{
				"bootc switch --download-only -- " + imageV2: {{}},
				statusCmd: status(&Status{Booted: booted, Staged: stagedUnlocked}),
			},
			wantCalls: []string{"bootc switch --download-only -- " + imageV2, statusCmd},
			wantErr:   []string{"staging " + imageV2, "any reboot would boot it"},
			wantIs:    ErrStagedUnlocked,
		},
		{
			name: "Stage left another image staged",
			do:   func(ctx context.Context, c *Client) error { return c.Stage(ctx, imageV2) },
			script: map[string][]answer{
				"bootc switch --download-only -- " + imageV2: {{}},
				statusCmd: status(&Status{Booted: booted, Staged: stagedOther}),
			},
			wantCalls: []string{"bootc switch --download-only -- " + imageV2, statusCmd},
			wantErr:   []string{"staged deployment is quay.io/example/os@sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"},
		},
		{
			name: "Stage of the booted image",
			do:   func(ctx context.Context, c *Client) error { return c.Stage(ctx, imageV1) },
			script: map[string][]answer{
				"bootc switch --download-only -- " + imageV1: {{}},
				statusCmd: status(&Status{Booted: booted}),
			},
			wantCalls: []string{"bootc switch --download-only -- " + imageV1, statusCmd},
			wantErr:   []string{"already the booted image"},
		},
		{
			// "--" keeps an image that looks like a flag from being read
			// as one: bootc gets it as the TARGET, and fails to pull it.
			name:      "Stage of an image that looks like a flag",
			do:        func(ctx context.Context, c *Client) error { return c.Stage(ctx, "--apply") },
			script:    map[string][]answer{"bootc switch --download-only -- --apply": {{err: failed("error: Switching: Parsing image reference --apply: invalid reference format")}}},
			wantCalls: []string{"bootc switch --download-only -- --apply"},
			wantErr:   []string{"staging --apply", "invalid reference format"},
		},
		{
			name:    "Stage without an image",
			do:      func(ctx context.Context, c *Client) error { return c.Stage(ctx, "") },
			wantErr: []string{"no image given"},
		},
		{
			name: "Apply download-only staged image",
			do:   func(ctx context.Context, c *Client) error { return c.Apply(ctx, imageV2) },
			script: map[string][]answer{
				statusCmd:                        status(&Status{Booted: booted, Staged: stagedLocked}),
				"bootc switch --from-downloaded": {{}},
				"systemctl reboot":               {{}},
			},
			wantCalls: []string{statusCmd, "bootc switch --from-downloaded", "systemctl reboot"},
		},
		{
			name: "Apply matches by digest",
			do:   func(ctx context.Context, c *Client) error { return c.Apply(ctx, imageV2) },
			script: map[string][]answer{
				statusCmd:                        status(&Status{Booted: booted, Staged: stagedByTag}),
				"bootc switch --from-downloaded": {{}},
				"systemctl reboot":               {{}},
			},
			wantCalls: []string{statusCmd, "bootc switch --from-downloaded", "systemctl reboot"},
		},
		{
			name: "Apply already unlocked only reboots",
			do:   func(ctx context.Context, c *Client) error { return c.Apply(ctx, imageV2) },
			script: map[string][]answer{
				statusCmd:          status(&Status{Booted: booted, Staged: stagedUnlocked}),
				"systemctl reboot": {{}},
			},
			wantCalls: []string{statusCmd, "systemctl reboot"},
		},
		{
			name:      "Apply with nothing staged",
			do:        func(ctx context.Context, c *Client) error { return c.Apply(ctx, imageV2) },
			script:    map[string][]answer{statusCmd: status(&Status{Booted: booted})},
			wantCalls: []string{statusCmd},
			wantErr:   []string{"applying " + imageV2, "staged: none"},
			wantIs:    ErrNotStaged,
		},
		{
			name:      "Apply with another image staged",
			do:        func(ctx context.Context, c *Client) error { return c.Apply(ctx, imageV2) },
			script:    map[string][]answer{statusCmd: status(&Status{Booted: booted, Staged: stagedOther})},
			wantCalls: []string{statusCmd},
			wantErr:   []string{"staged: quay.io/example/os@sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc (sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc)"},
			wantIs:    ErrNotStaged,
		},
		{
			name: "Apply unlock failure does not reboot",
			do:   func(ctx context.Context, c *Client) error { return c.Apply(ctx, imageV2) },
			script: map[string][]answer{
				statusCmd:                        status(&Status{Booted: booted, Staged: stagedLocked}),
				"bootc switch --from-downloaded": {{err: failed("error: No staged deployment in download-only mode")}},
			},
			wantCalls: []string{statusCmd, "bootc switch --from-downloaded"},
			wantErr:   []string{"applying " + imageV2, "unlocking", "bootc switch --from-downloaded", "No staged deployment in download-only mode"},
		},
		{
			name: "Apply reboot failure",
			do:   func(ctx context.Context, c *Client) error { return c.Apply(ctx, imageV2) },
			script: map[string][]answer{
				statusCmd:                        status(&Status{Booted: booted, Staged: stagedLocked}),
				"bootc switch --from-downloaded": {{}},
				"systemctl reboot":               {{err: failed("Failed to connect to bus: No such file or directory")}},
			},
			wantCalls: []string{statusCmd, "bootc switch --from-downloaded", "systemctl reboot"},
			wantErr:   []string{"unlocked but the reboot failed", "systemctl reboot", "Failed to connect to bus"},
		},
		{
			name: "Rollback",
			do:   func(ctx context.Context, c *Client) error { return c.Rollback(ctx) },
			script: map[string][]answer{
				statusCmd:        status(&Status{Booted: booted, Staged: stagedLocked, Rollback: rollback}),
				"bootc rollback": {{stdout: "Next boot: rollback deployment\n"}},
			},
			wantCalls: []string{statusCmd, "bootc rollback"},
		},
		{
			name:      "Rollback already queued is not undone",
			do:        func(ctx context.Context, c *Client) error { return c.Rollback(ctx) },
			script:    map[string][]answer{statusCmd: status(&Status{Booted: booted, Rollback: rollback, RollbackQueued: true})},
			wantCalls: []string{statusCmd},
		},
		{
			name:      "Rollback without a rollback deployment",
			do:        func(ctx context.Context, c *Client) error { return c.Rollback(ctx) },
			script:    map[string][]answer{statusCmd: status(&Status{Booted: booted})},
			wantCalls: []string{statusCmd},
			wantErr:   []string{"rolling back", "no rollback deployment"},
			wantIs:    ErrNoRollback,
		},
		{
			name: "Rollback failure quotes stderr",
			do:   func(ctx context.Context, c *Client) error { return c.Rollback(ctx) },
			script: map[string][]answer{
				statusCmd:        status(&Status{Booted: booted, Rollback: rollback}),
				"bootc rollback": {{err: failed("error: Rolling back: Acquiring sysroot lock: Resource temporarily unavailable")}},
			},
			wantCalls: []string{statusCmd, "bootc rollback"},
			wantErr:   []string{"rolling back to quay.io/example/os@sha256:0000000000000000000000000000000000000000000000000000000000000000", "bootc rollback", "Resource temporarily unavailable"},
		},
		{
			name:      "Reboot",
			do:        func(ctx context.Context, c *Client) error { return c.Reboot(ctx) },
			script:    map[string][]answer{"systemctl reboot": {{}}},
			wantCalls: []string{"systemctl reboot"},
		},
		{
			name:      "Reboot failure quotes stderr",
			do:        func(ctx context.Context, c *Client) error { return c.Reboot(ctx) },
			script:    map[string][]answer{"systemctl reboot": {{err: failed("Call to Reboot failed: Access denied")}}},
			wantCalls: []string{"systemctl reboot"},
			wantErr:   []string{"rebooting", "systemctl reboot", "exit status 1", "Access denied"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runner := &fakeRunner{script: tt.script}
			err := tt.do(context.Background(), &Client{Runner: runner})

			if got, want := strings.Join(runner.calls, "\n"), strings.Join(tt.wantCalls, "\n"); got != want {
				t.Errorf("commands run:\n%s\nwant:\n%s", got, want)
			}
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("error = %v, want none", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one containing %q", tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error = %q, want it to contain %q", err, want)
				}
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.wantIs)
			}
			// Command failures stay reachable for callers that classify them.
			var cmdErr *CommandError
			if strings.Contains(err.Error(), "exit status") && !errors.As(err, &cmdErr) {
				t.Errorf("error %v does not wrap the *CommandError", err)
			}
		})
	}
}

func TestClientStatusParses(t *testing.T) {
	want := &Status{
		SpecImage: imageV2,
		Booted:    &Deployment{Image: imageV1, Transport: "registry", Digest: "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
		Staged:    &Deployment{Image: imageV2, Transport: "registry", Digest: digestV2, DownloadOnly: true},
	}
	runner := &fakeRunner{script: map[string][]answer{statusCmd: {{stdout: string(encodeV1(t, want))}}}}
	got, err := (&Client{Runner: runner}).Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := diffStatus(got, want); d != "" {
		t.Errorf("Status mismatch:\n%s", d)
	}
}

func TestClientWithoutRunner(t *testing.T) {
	err := (&Client{}).Reboot(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no Runner") {
		t.Errorf("error = %v, want one saying the client has no Runner", err)
	}
}

func TestMatches(t *testing.T) {
	d := &Deployment{Image: "quay.io/x/os:v2", Digest: "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}
	tests := []struct {
		image string
		want  bool
	}{
		{"quay.io/x/os:v2", true},
		{"quay.io/x/os@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", true},
		{"quay.io/x/os:v2@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", true},
		{"quay.io/x/os@sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc", false},
		{"quay.io/x/os:v3", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := matches(d, tt.image); got != tt.want {
			t.Errorf("matches(%s, %q) = %v, want %v", formatDeployment(d), tt.image, got, tt.want)
		}
	}
	if matches(nil, "quay.io/x/os:v2") {
		t.Error("matches(nil, ...) = true")
	}
	if matches(&Deployment{}, "x@") {
		t.Error("an ostree deployment with no digest matched an empty digest")
	}
}

// TestStatusReusesUnchangedOutput: an output equal to the last one is not
// parsed again (the same *Status comes back); a changed output is, and a
// failed read in between does not leave a stale answer behind.
func TestStatusReusesUnchangedOutput(t *testing.T) {
	booted := &Deployment{Image: imageV1, Transport: "registry", Digest: "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}
	staged := &Deployment{Image: imageV2, Transport: "registry", Digest: digestV2, DownloadOnly: true}
	one := string(encodeV1(t, &Status{Booted: booted}))
	two := string(encodeV1(t, &Status{Booted: booted, Staged: staged}))
	c := &Client{Runner: &fakeRunner{script: map[string][]answer{statusCmd: {
		{stdout: one}, {stdout: one}, {err: failed("error: busy")}, {stdout: two}, {stdout: "{not json"},
	}}}}
	ctx := context.Background()
	a, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("the same output was parsed again")
	}
	if _, err := c.Status(ctx); err == nil {
		t.Fatal("a failed bootc status gave no error")
	}
	d, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d == a || d.Staged == nil || d.Staged.Image != imageV2 {
		t.Errorf("a changed output gave %+v, want the staged %s", d, imageV2)
	}
	if _, err := c.Status(ctx); err == nil {
		t.Error("malformed output after a good one gave no error")
	}
}

// TestStatusSharedBetweenClients: two Clients (two daemons of one process,
// as in the twin) that read the same output get the one parse of it; a
// different output is parsed on its own.
func TestStatusSharedBetweenClients(t *testing.T) {
	booted := &Deployment{Image: imageV1, Transport: "registry", Digest: "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}
	one := string(encodeV1(t, &Status{Booted: booted}))
	other := string(encodeV1(t, &Status{Booted: booted, Staged: &Deployment{Image: imageV2, Transport: "registry", Digest: digestV2, DownloadOnly: true}}))
	a := &Client{Runner: &fakeRunner{script: map[string][]answer{statusCmd: {{stdout: one}}}}}
	b := &Client{Runner: &fakeRunner{script: map[string][]answer{statusCmd: {{stdout: one}, {stdout: other}}}}}
	ctx := context.Background()
	sa, err := a.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sa != sb {
		t.Error("two clients reading the same output parsed it twice")
	}
	sc, err := b.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sc == sa || sc.Staged == nil || sc.Staged.Image != imageV2 {
		t.Errorf("a different output gave %+v, want its own parse with the staged %s", sc, imageV2)
	}
}

// TestShuttingDown: systemctl is-system-running prints the state and exits
// 1 in every state but running; the state printed decides, and only a
// command that prints none (or more than one word) fails.
func TestShuttingDown(t *testing.T) {
	exit1 := &CommandError{Err: errors.New("exit status 1")}
	for _, c := range []struct {
		stdout  string
		err     error
		want    bool
		wantErr string
	}{
		{"running\n", nil, false, ""},
		{"stopping\n", exit1, true, ""},
		{"degraded\n", exit1, false, ""},
		{"starting\n", exit1, false, ""},
		{"", &CommandError{Err: errors.New("exit status 1"), Stderr: "Failed to connect to bus"}, false, "Failed to connect to bus"},
		{"", nil, false, `printed ""`},
		{"stopping now\n", nil, false, "want one systemd state"},
	} {
		f := &fakeRunner{script: map[string][]answer{"systemctl is-system-running": {{c.stdout, c.err}}}}
		got, err := (&Client{Runner: f}).ShuttingDown(context.Background())
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: err %v, want one containing %q", c.stdout, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: ShuttingDown = %v, %v; want %v", c.stdout, got, err, c.want)
		}
	}
}
