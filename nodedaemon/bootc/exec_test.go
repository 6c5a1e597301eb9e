package bootc

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"
)

func needSh(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh on this machine")
	}
}

func TestExecRunner(t *testing.T) {
	needSh(t)
	var r Runner = ExecRunner{}
	tests := []struct {
		name       string
		script     string
		wantStdout string
		wantStderr string // "" means success
		wantCode   int
	}{
		{"success returns stdout only", `printf '{"a":1}'; echo noise >&2`, `{"a":1}`, "", 0},
		{"failure carries trimmed stderr", `printf partial; printf '\n  first line \n\nerror: boom\n' >&2; exit 3`, "partial", "first line; error: boom", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := r.Run(context.Background(), "sh", "-c", tt.script)
			if got := string(out); got != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", got, tt.wantStdout)
			}
			if tt.wantStderr == "" {
				if err != nil {
					t.Fatalf("error = %v, want none", err)
				}
				return
			}
			var cmdErr *CommandError
			if !errors.As(err, &cmdErr) {
				t.Fatalf("error = %#v, want a *CommandError", err)
			}
			if cmdErr.Stderr != tt.wantStderr {
				t.Errorf("Stderr = %q, want %q", cmdErr.Stderr, tt.wantStderr)
			}
			var exitErr *exec.ExitError
			if !errors.As(err, &exitErr) || exitErr.ExitCode() != tt.wantCode {
				t.Errorf("error %v: want exit code %d", err, tt.wantCode)
			}
			if want := "exit status 3: " + tt.wantStderr; err.Error() != want {
				t.Errorf("error = %q, want %q", err, want)
			}
		})
	}
}

func TestExecRunnerMissingCommand(t *testing.T) {
	_, err := ExecRunner{}.Run(context.Background(), "bootroll-no-such-command-xyz")
	var cmdErr *CommandError
	if !errors.As(err, &cmdErr) || !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("error = %v, want a *CommandError wrapping exec.ErrNotFound", err)
	}
}

func TestExecRunnerCancelled(t *testing.T) {
	needSh(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (ExecRunner{}).Run(ctx, "sh", "-c", "exit 0"); err == nil {
		t.Error("Run with a cancelled context succeeded")
	}
}

func TestBoundStderr(t *testing.T) {
	long := strings.Repeat("é", MaxStderr) + "error: the cause"
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"blank lines dropped", "\n\n  a  \n\n b\n", "a; b"},
		{"invalid UTF-8 replaced", "bad \xff byte", "bad \uFFFD byte"},
	}
	for _, tt := range tests {
		if got := boundStderr([]byte(tt.in)); got != tt.want {
			t.Errorf("%s: boundStderr(%q) = %q, want %q", tt.name, tt.in, got, tt.want)
		}
	}
	got := boundStderr([]byte(long))
	if len(got) > MaxStderr {
		t.Errorf("bounded stderr is %d bytes, want at most %d", len(got), MaxStderr)
	}
	if !strings.HasPrefix(got, "…") || !strings.HasSuffix(got, "error: the cause") || !utf8.ValidString(got) {
		t.Errorf("bounded stderr = %q, want valid UTF-8 that keeps the end", got)
	}
}

func TestBuffers(t *testing.T) {
	c := &capBuffer{max: 5}
	for _, p := range []string{"abc", "def", "g"} {
		if n, err := c.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("capBuffer.Write(%q) = %d, %v", p, n, err)
		}
	}
	if got := string(c.buf); got != "abcde" || !c.over {
		t.Errorf("capBuffer = %q over=%v, want %q over=true", got, c.over, "abcde")
	}
	tb := &tailBuffer{max: 4}
	for _, p := range []string{"abc", "def", "g"} {
		tb.Write([]byte(p))
	}
	if got := string(tb.buf); got != "defg" {
		t.Errorf("tailBuffer = %q, want %q", got, "defg")
	}
}
