package bootc

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// HostPath is the PATH ChrootRunner looks commands up in, and gives them,
// inside the host root: systemd's default PATH, which has bootc and
// systemctl on every bootc host.
const HostPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ChrootRunner runs host commands in a chroot into the host's root
// filesystem mounted at Root (a hostPath volume of / in a pod), as the
// OpenShift machine-config daemon does with /rootfs. The daemon's image then
// needs nothing but the daemon: bootc, systemctl and the libraries they load
// are the host's. It is pure Go (exec.Cmd's SysProcAttr.Chroot), unlike
// nsenter, which would have to be in the image; and unlike entering PID 1's
// mount namespace from Go, it does not have to fight Go's threads, since
// the chroot happens in the forked child only.
//
// It needs CAP_SYS_CHROOT. For systemctl to reach the host's systemd the pod
// needs hostPID (so /proc/1/root inside the chroot is the same root, and
// systemctl does not think it runs in a chroot) and the host's /run, which a
// recursive hostPath mount of / brings along.
type ChrootRunner struct {
	// Root is the host's root filesystem as the daemon sees it, e.g. /host.
	Root string
}

// Run looks name up in HostPath inside Root, runs it chrooted into Root
// with working directory / and PATH set to HostPath, and returns its stdout
// as ExecRunner does. A failure is a *CommandError.
func (r ChrootRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	file, err := r.LookPath(name)
	if err != nil {
		return nil, &CommandError{Err: err}
	}
	cmd := exec.CommandContext(ctx, file, args...) // edge: runs host commands
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: r.Root}
	cmd.Dir = "/" // inside the chroot
	cmd.Env = withPath(os.Environ(), HostPath)
	return run(cmd, func(err error) error { return fmt.Errorf("%s (chroot %s): %w", file, r.Root, err) })
}

// LookPath returns the path, as seen inside Root, of the first entry of
// HostPath that holds name. exec.LookPath cannot be used: it would search
// the daemon's own filesystem, which has no bootc. An entry may be a symbolic
// link (it is resolved inside the chroot when the command starts).
func (r ChrootRunner) LookPath(name string) (string, error) {
	if r.Root == "" || !filepath.IsAbs(r.Root) {
		return "", fmt.Errorf("run %s in the host root: the host root %q is not an absolute path", name, r.Root)
	}
	if name == "" || strings.Contains(name, "/") {
		if path.IsAbs(name) {
			if err := isCommand(filepath.Join(r.Root, name)); err != nil {
				return "", fmt.Errorf("run %s in the host root %s: %w", name, r.Root, err)
			}
			return name, nil
		}
		return "", fmt.Errorf("run %q in the host root %s: want a command name or an absolute path", name, r.Root)
	}
	for _, dir := range filepath.SplitList(HostPath) {
		file := path.Join(dir, name)
		if isCommand(filepath.Join(r.Root, file)) == nil {
			return file, nil
		}
	}
	return "", fmt.Errorf("run %s in the host root %s: %w (searched %s)", name, r.Root, exec.ErrNotFound, HostPath)
}

// isCommand reports whether p exists and is not a directory. A symbolic
// link is not followed: an absolute target points into the host root, not
// the daemon's.
func isCommand(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return &fs.PathError{Op: "exec", Path: p, Err: syscall.EISDIR}
	}
	return nil
}

// withPath returns env with PATH set to p.
func withPath(env []string, p string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PATH=") {
			out = append(out, kv)
		}
	}
	return append(out, "PATH="+p)
}
