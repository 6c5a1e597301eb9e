package bootc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeHostRoot makes a directory laid out like a host root with a static
// helper program at usr/sbin/NAME and a file /marker, and returns it.
func fakeHostRoot(t *testing.T, name string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "usr", "sbin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "marker"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(root, "usr", "sbin", name), "./testdata/chroothelper")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // static: the fake root has no libc
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build helper: %v\n%s", err, out)
	}
	return root
}

func TestChrootRunner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root (CAP_SYS_CHROOT)")
	}
	root := fakeHostRoot(t, "bootc")
	// The daemon's own working directory and PATH must not leak in.
	t.Chdir(t.TempDir())
	t.Setenv("PATH", "/nowhere")
	var r Runner = ChrootRunner{Root: root}

	out, err := r.Run(context.Background(), "bootc", "status", "--json")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := `marker=host wd=/ path=` + HostPath + ` args=["status" "--json"]`
	if got := string(out); got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}

	out, err = r.Run(context.Background(), "/usr/sbin/bootc", "fail")
	var cmdErr *CommandError
	var exitErr *exec.ExitError
	if !errors.As(err, &cmdErr) || !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
		t.Fatalf("Run fail = %v, want a *CommandError with exit code 3", err)
	}
	if cmdErr.Stderr != "error: asked to fail" || !strings.HasPrefix(string(out), "marker=host") {
		t.Errorf("stderr = %q, stdout = %q", cmdErr.Stderr, out)
	}
}

func TestChrootRunnerLookPath(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{"usr/bin", "usr/sbin/systemctl"} { // systemctl in sbin is a directory
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// An absolute symlink resolves inside the host root, not here: it is
	// found even though its target does not exist in the daemon's root.
	if err := os.Symlink("/usr/lib/systemd/systemctl-real", filepath.Join(root, "usr/bin/systemctl")); err != nil {
		t.Fatal(err)
	}
	r := ChrootRunner{Root: root}
	tests := []struct {
		name, want, wantErr string
	}{
		{"systemctl", "/usr/bin/systemctl", ""},
		{"/usr/bin/systemctl", "/usr/bin/systemctl", ""},
		{"bootc", "", "executable file not found in $PATH (searched " + HostPath + ")"},
		{"/usr/sbin/systemctl", "", "is a directory"},
		{"bin/bootc", "", "want a command name or an absolute path"},
	}
	for _, tt := range tests {
		got, err := r.LookPath(tt.name)
		if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("LookPath(%q) = %q, %v; want %q, error containing %q", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
	var cmdErr *CommandError
	if _, err := (ChrootRunner{}).Run(context.Background(), "bootc"); !errors.As(err, &cmdErr) {
		t.Errorf("Run with no Root = %v, want a *CommandError", err)
	}
	_, err := r.Run(context.Background(), "bootc")
	if !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("Run of a missing command = %v, want exec.ErrNotFound", err)
	}
}
