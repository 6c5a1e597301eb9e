// Package critest runs the real components the CRI tests need: a
// containerd started with its own configuration, state and socket in a
// temporary directory, and an in-process OCI registry (go-containerregistry
// pkg/registry) that can be taken down and brought back on the same port,
// counts its requests and serves images the test builds.
//
// It is test support: it starts processes and listens on sockets.
package critest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bootroll/bootroll/nodedaemon/cri"
)

// InstallHint says how to get containerd.
const InstallHint = "containerd not found: run `make test` as root (it installs Debian's containerd with apt-get) or apt-get install -y containerd"

// RequireContainerd fails the test when containerd is not on PATH, and
// skips it instead under -short. It returns the binary's path.
func RequireContainerd(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("containerd")
	if err != nil {
		if testing.Short() {
			t.Skip("-short: " + InstallHint)
		}
		t.Fatal(InstallHint)
	}
	return p
}

// RequireRoot fails the test unless it runs as root.
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("this test needs root (uid %d) to %s: run it as root, e.g. sudo -E go test ./nodedaemon/...", os.Geteuid(), why)
	}
}

// Containerd is a containerd process run for a test.
type Containerd struct {
	// Dir holds the config, state, log and socket (short: unix socket
	// paths must stay under ~100 bytes).
	Dir string
	// Root is containerd's root (content store, snapshots, metadata).
	Root string
	// Socket is the CRI gRPC endpoint.
	Socket string

	bin    string
	config string
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Options configures StartContainerd.
type Options struct {
	// Root, when set, is used as containerd's root instead of a directory
	// in Dir, e.g. a small tmpfs.
	Root string
}

// StartContainerd starts containerd with a configuration of its own in a
// new directory below /tmp and stops it when the test ends.
func StartContainerd(t testing.TB, opts Options) *Containerd {
	t.Helper()
	bin := RequireContainerd(t)
	dir, err := os.MkdirTemp("/tmp", "ctrd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	c := &Containerd{
		Dir:    dir,
		Root:   opts.Root,
		Socket: filepath.Join(dir, "c.sock"),
		bin:    bin,
		config: filepath.Join(dir, "config.toml"),
		log:    filepath.Join(dir, "containerd.log"),
	}
	if c.Root == "" {
		c.Root = filepath.Join(dir, "root")
	}
	for _, d := range []string{c.Root, filepath.Join(dir, "state"), filepath.Join(dir, "opt"), filepath.Join(dir, "cni", "bin"), filepath.Join(dir, "cni", "conf")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(c.config, []byte(c.configTOML()), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(t) })
	c.Start(t)
	return c
}

// configTOML is a containerd 1.6 (config version 2) configuration with
// everything in c.Dir: no AppArmor, a placeholder sandbox image (no pod
// is ever run), empty CNI directories, the overlayfs snapshotter, the
// snapshotters that need special filesystems disabled, and a random
// streaming port so that two test processes can run side by side.
func (c *Containerd) configTOML() string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  disable_apparmor = true
  sandbox_image = "registry.invalid/pause:placeholder"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[6]q
    conf_dir = %[7]q
`, c.Root, filepath.Join(c.Dir, "state"), c.Socket, c.Socket+".ttrpc", filepath.Join(c.Dir, "opt"),
		filepath.Join(c.Dir, "cni", "bin"), filepath.Join(c.Dir, "cni", "conf"))
}

// Start starts containerd (again, after Stop) and waits for its socket.
func (c *Containerd) Start(t testing.TB) {
	t.Helper()
	if c.cmd != nil {
		t.Fatal("containerd is already running")
	}
	_ = os.Remove(c.Socket)
	logf, err := os.OpenFile(c.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(c.bin, "--config", c.config)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start containerd: %v", err)
	}
	logf.Close()
	c.cmd = cmd
	c.exited = make(chan struct{})
	go func() { _ = cmd.Wait(); close(c.exited) }() // edge: test harness: reaps containerd

	deadline := time.Now().Add(15 * time.Second) // edge: test harness: waits for a real process
	for {
		if _, err := os.Stat(c.Socket); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			cl, err := cri.Dial(ctx, c.Socket)
			cancel()
			if err == nil {
				_ = cl.Close()
				return
			}
		}
		select {
		case <-c.exited:
			c.cmd = nil
			t.Fatalf("containerd exited at start; its log:\n%s", c.LogTail())
		default:
		}
		if time.Now().After(deadline) { // edge: test harness
			t.Fatalf("containerd's socket %s did not come up in 15s; its log:\n%s", c.Socket, c.LogTail())
		}
		time.Sleep(20 * time.Millisecond) // edge: test harness: polls for the socket
	}
}

// Stop stops containerd: SIGTERM, then SIGKILL after 10s. Stopping a
// stopped containerd does nothing.
func (c *Containerd) Stop(t testing.TB) {
	t.Helper()
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second): // edge: test harness: bounds containerd's shutdown
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	c.cmd = nil
	if t.Failed() {
		t.Logf("containerd log:\n%s", c.LogTail())
	}
}

// Terminate sends containerd SIGTERM and returns at once; Stop waits for
// it to exit. It is safe to call from any goroutine (a registry hook, say)
// while containerd runs.
func (c *Containerd) Terminate() {
	if cmd := c.cmd; cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
}

// Dial connects a CRI client, closed when the test ends.
func (c *Containerd) Dial(t testing.TB) *cri.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := cri.Dial(ctx, c.Socket)
	if err != nil {
		t.Fatalf("dial containerd: %v", err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// LogTail is the end of containerd's log.
func (c *Containerd) LogTail() string {
	b, err := os.ReadFile(c.log)
	if err != nil {
		return err.Error()
	}
	const max = 8 << 10
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(bytes.TrimSpace(b))
}

// MountTmpfs mounts a tmpfs of the given size ("64m") on a new directory
// below /tmp and unmounts it when the test ends. It needs root.
func MountTmpfs(t testing.TB, size string) string {
	t.Helper()
	RequireRoot(t, "mount a small tmpfs for the image filesystem")
	dir, err := os.MkdirTemp("/tmp", "ctfs")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		_ = os.Remove(dir)
		t.Fatalf("mount -t tmpfs -o size=%s tmpfs %s: %v: %s", size, dir, err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		// containerd must be stopped first (its cleanup was registered
		// later, so it runs earlier); a lazy unmount copes with leftovers.
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
		}
		_ = os.Remove(dir)
	})
	return dir
}
