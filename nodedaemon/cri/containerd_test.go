package cri_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	"github.com/bootroll/bootroll/nodedaemon/cri"
	"github.com/bootroll/bootroll/nodedaemon/cri/critest"
)

// These tests run the client against a real containerd (Debian's 1.6)
// started by critest, pulling from an in-process registry. They log every
// error containerd returns, so a change of containerd's messages shows up
// here first; observedErrors in errors_test.go pins the ones seen.

const mib = 1 << 20

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// logErr logs a real error the way it reaches Classify.
func logErr(t *testing.T, what string, err error) {
	t.Helper()
	st, _ := status.FromError(errors.Unwrap(err))
	t.Logf("%s: kind %s, code %s, message %q", what, cri.Classify(err), st.Code(), st.Message())
}

func TestContainerdImageLifecycle(t *testing.T) {
	ctrd := critest.StartContainerd(t, critest.Options{})
	reg := critest.NewRegistry(t)
	img := reg.Push(t, "apps/web", critest.RandomImage(t, 1, 2*mib, 2))
	c := ctrd.Dial(t)
	ctx := ctxT(t, time.Minute)

	if got, err := c.ImageStatus(ctx, img.Ref); err != nil || got != nil {
		t.Fatalf("ImageStatus before pull = %+v, %v; want nil, nil", got, err)
	}
	id, err := c.PullImage(ctx, img.Ref, nil)
	if err != nil {
		t.Fatalf("PullImage: %v", err)
	}
	cfg, _ := img.Image.ConfigName()
	if id != cfg.String() {
		t.Errorf("PullImage returned %q, want the config digest %s", id, cfg)
	}
	got, err := c.ImageStatus(ctx, img.Ref)
	if err != nil || got == nil {
		t.Fatalf("ImageStatus after pull = %+v, %v", got, err)
	}
	if got.ID != id {
		t.Errorf("ImageStatus ID = %s, want %s", got.ID, id)
	}
	if got.Size != img.Size {
		t.Errorf("ImageStatus Size = %d, want the compressed size %d", got.Size, img.Size)
	}
	if !slices.Contains(got.RepoDigests, img.Ref) {
		t.Errorf("RepoDigests = %v, want %s", got.RepoDigests, img.Ref)
	}

	list, err := c.ListImages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(list, func(i cri.Image) bool { return i.ID == id }) {
		t.Errorf("ListImages = %+v, want %s in it", list, id)
	}

	fss, err := c.ImageFsInfo(ctx)
	if err != nil || len(fss) == 0 {
		t.Fatalf("ImageFsInfo = %+v, %v", fss, err)
	}
	t.Logf("ImageFsInfo: %+v", fss)
	if !strings.HasPrefix(fss[0].Mountpoint, ctrd.Root) {
		t.Errorf("image filesystem %s is not below containerd's root %s", fss[0].Mountpoint, ctrd.Root)
	}
	sp, err := c.ImageFs(ctx)
	if err != nil || sp.Capacity <= 0 || sp.Available <= 0 || sp.Available > sp.Capacity {
		t.Errorf("ImageFs = %+v, %v", sp, err)
	}

	// Pulling a present image still asks the registry.
	reg.ResetRequests()
	if _, err := c.PullImage(ctx, img.Ref, nil); err != nil {
		t.Fatal(err)
	}
	if reg.Requests() == 0 {
		t.Errorf("PullImage of a present image did not contact the registry (cri-errors.md says it does)")
	}
	// ImageStatus never does.
	reg.ResetRequests()
	if _, err := c.ImageStatus(ctx, img.Ref); err != nil {
		t.Fatal(err)
	}
	if n := reg.Requests(); n != 0 {
		t.Errorf("ImageStatus made %d registry requests: %v", n, reg.RequestLog())
	}

	if err := c.RemoveImage(ctx, img.Ref); err != nil {
		t.Fatal(err)
	}
	if got, err := c.ImageStatus(ctx, img.Ref); err != nil || got != nil {
		t.Errorf("ImageStatus after remove = %+v, %v", got, err)
	}
	if err := c.RemoveImage(ctx, img.Ref); err != nil {
		t.Errorf("RemoveImage of an absent image: %v (want OK)", err)
	}
}

// TestContainerdErrors provokes each failure of cri-errors.md on the real
// containerd and checks its classification.
func TestContainerdErrors(t *testing.T) {
	ctrd := critest.StartContainerd(t, critest.Options{})
	reg := critest.NewRegistry(t)
	c := ctrd.Dial(t)

	pullFails := func(t *testing.T, ref string, auth *cri.Auth, want cri.Kind) error {
		t.Helper()
		_, err := c.PullImage(ctxT(t, time.Minute), ref, auth)
		if err == nil {
			t.Fatalf("pull %s succeeded, want a %s error", ref, want)
		}
		logErr(t, t.Name(), err)
		if got := cri.Classify(err); got != want {
			t.Errorf("Classify = %s, want %s; error: %v", got, want, err)
		}
		return err
	}

	t.Run("digest not in registry", func(t *testing.T) {
		pullFails(t, reg.MissingRef("apps/missing"), nil, cri.KindNotFound)
	})
	t.Run("layer blob missing", func(t *testing.T) {
		img := reg.Push(t, "apps/nolayer", critest.RandomImage(t, 2, 64<<10, 1))
		m, _ := img.Image.Manifest()
		reg.HideBlob(m.Layers[0].Digest.String())
		pullFails(t, img.Ref, nil, cri.KindNotFound)
	})
	t.Run("malformed reference", func(t *testing.T) {
		pullFails(t, reg.Host+"/Apps/Upper@sha256:abc", nil, cri.KindInvalidReference)
	})
	t.Run("registry killed mid-pull", func(t *testing.T) {
		img := reg.Push(t, "apps/cut", critest.RandomImage(t, 3, 4*mib, 1))
		reg.CutBlobsAfter(mib)
		defer reg.CutBlobsAfter(0)
		pullFails(t, img.Ref, nil, cri.KindRegistryUnreachable)
	})
	t.Run("client deadline", func(t *testing.T) {
		img := reg.Push(t, "apps/slow", critest.RandomImage(t, 4, 64<<10, 1))
		reg.OnBlob(func(string) { time.Sleep(2 * time.Second) }) // edge: test: a slow registry
		defer reg.OnBlob(nil)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := c.PullImage(ctx, img.Ref, nil)
		if err == nil {
			t.Fatal("pull succeeded within its deadline")
		}
		logErr(t, t.Name(), err)
		if got := cri.Classify(err); got != cri.KindDeadline {
			t.Errorf("Classify = %s, want %s; error: %v", got, cri.KindDeadline, err)
		}
	})
	t.Run("auth", func(t *testing.T) {
		img := reg.Push(t, "apps/private", critest.RandomImage(t, 5, 64<<10, 1))
		reg.RequireAuth("puller", "s3cret")
		defer reg.RequireAuth("", "")
		pullFails(t, img.Ref, nil, cri.KindAuth)
		pullFails(t, img.Ref, &cri.Auth{Username: "puller", Password: "wrong", ServerAddress: reg.Host}, cri.KindAuth)

		secret := fmt.Sprintf(`{"auths":{"http://%s":{"auth":%q}}}`, reg.Host, base64.StdEncoding.EncodeToString([]byte("puller:s3cret")))
		auth, err := cri.AuthFor([]byte(secret), img.Ref)
		if err != nil || auth == nil {
			t.Fatalf("AuthFor = %v, %v", auth, err)
		}
		if _, err := c.PullImage(ctxT(t, time.Minute), img.Ref, auth); err != nil {
			t.Fatalf("pull with the pull secret's credentials: %v", err)
		}
	})
	// Last: it leaves the registry down.
	t.Run("registry down", func(t *testing.T) {
		img := reg.Push(t, "apps/down", critest.RandomImage(t, 6, 64<<10, 1))
		reg.Down()
		defer reg.Up(t)
		pullFails(t, img.Ref, nil, cri.KindRegistryUnreachable)
	})
}

// TestContainerdStopped: containerd going away mid-pull and not running.
func TestContainerdStopped(t *testing.T) {
	ctrd := critest.StartContainerd(t, critest.Options{})
	reg := critest.NewRegistry(t)
	img := reg.Push(t, "apps/big", critest.RandomImage(t, 7, 8*mib, 1))
	c := ctrd.Dial(t)

	var once sync.Once
	reg.OnBlob(func(string) {
		once.Do(func() {
			ctrd.Terminate()
			// Hold the download until containerd is gone.
			time.Sleep(3 * time.Second) // edge: test: a real process shuts down
		})
	})
	_, err := c.PullImage(ctxT(t, time.Minute), img.Ref, nil)
	if err == nil {
		t.Fatal("pull succeeded while containerd stopped")
	}
	logErr(t, "containerd stopped mid-pull", err)
	if got := cri.Classify(err); got != cri.KindRuntimeUnavailable {
		t.Errorf("stopped mid-pull: Classify = %s, want RuntimeUnavailable; error: %v", got, err)
	}
	ctrd.Stop(t)
	reg.OnBlob(nil)

	_, err = c.ImageStatus(ctxT(t, 10*time.Second), img.Ref)
	if err == nil {
		t.Fatal("ImageStatus answered with containerd stopped")
	}
	logErr(t, "containerd not running (existing connection)", err)
	if got := cri.Classify(err); got != cri.KindRuntimeUnavailable {
		t.Errorf("not running: Classify = %s, want RuntimeUnavailable; error: %v", got, err)
	}

	_, err = cri.Dial(ctxT(t, 10*time.Second), ctrd.Socket)
	if err == nil {
		t.Fatal("Dial succeeded with containerd stopped")
	}
	t.Logf("Dial with containerd stopped: kind %s: %v", cri.Classify(err), err)
	if got := cri.Classify(err); got != cri.KindRuntimeUnavailable {
		t.Errorf("Dial: Classify = %s, want RuntimeUnavailable; error: %v", got, err)
	}
}

// TestContainerdOutOfSpace: containerd's root on a 64 MiB tmpfs, a 100 MiB
// image.
func TestContainerdOutOfSpace(t *testing.T) {
	critest.RequireContainerd(t)
	root := critest.MountTmpfs(t, "64m")
	ctrd := critest.StartContainerd(t, critest.Options{Root: root})
	reg := critest.NewRegistry(t)
	img := reg.Push(t, "apps/huge", critest.RandomImage(t, 8, 100*mib, 1))
	c := ctrd.Dial(t)

	_, err := c.PullImage(ctxT(t, 2*time.Minute), img.Ref, nil)
	if err == nil {
		t.Fatal("a 100 MiB image fit on a 64 MiB filesystem")
	}
	logErr(t, "disk full", err)
	if got := cri.Classify(err); got != cri.KindOutOfSpace {
		t.Errorf("Classify = %s, want OutOfSpace; error: %v", got, err)
	}
	// containerd frees the partial download shortly after.
	deadline := time.Now().Add(5 * time.Second) // edge: test: waits on a real process
	for {
		sp, err := c.ImageFs(ctxT(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if sp.Available > sp.Capacity/2 {
			t.Logf("after the failure: %d of %d bytes available", sp.Available, sp.Capacity)
			break
		}
		if time.Now().After(deadline) { // edge: test
			t.Errorf("partial data not freed 5s after ENOSPC: %+v", sp)
			break
		}
		time.Sleep(50 * time.Millisecond) // edge: test: polls a real process
	}
}

// TestContainerdFind: Find, given the well-known layout below a host root
// as the DaemonSet mounts it, skips what is not a CRI endpoint (a missing
// path, containerd's own ttrpc socket, which is no gRPC) with a reason
// and uses the real containerd; with containerd stopped it finds nothing
// and says why for each socket.
func TestContainerdFind(t *testing.T) {
	ctrd := critest.StartContainerd(t, critest.Options{})
	// A host root whose /run/containerd/containerd.sock is the test's
	// containerd, and whose CRI-O sockets are missing.
	root := ctrd.Dir + "/h"
	if err := os.MkdirAll(root+"/run/containerd", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ctrd.Socket, root+"/run/containerd/containerd.sock"); err != nil {
		t.Fatal(err)
	}
	ttrpc := ctrd.Socket + ".ttrpc"
	sockets := append([]string{ctrd.Dir + "/missing.sock", ttrpc}, cri.Candidates(root)...)

	c, rt, skipped, err := cri.Find(ctxT(t, time.Minute), sockets, 3*time.Second)
	if err != nil {
		t.Fatalf("Find: %v", err)
	}
	defer c.Close()
	t.Logf("found %+v; skipped %+v", rt, skipped)
	if rt.Name != "containerd" || rt.Socket != root+"/run/containerd/containerd.sock" {
		t.Errorf("found %+v, want containerd at %s/run/containerd/containerd.sock", rt, root)
	}
	if len(skipped) != 2 || !strings.Contains(skipped[0].Reason, "no such file") || skipped[1].Socket != ttrpc || !strings.Contains(skipped[1].Reason, "does not answer") && !strings.Contains(skipped[1].Reason, "no gRPC server answers") {
		t.Errorf("skipped %+v; want the missing path (no such file) and the ttrpc socket (not gRPC)", skipped)
	}
	if _, err := c.ImageFsInfo(ctxT(t, 10*time.Second)); err != nil {
		t.Errorf("the client Find returned does not work: %v", err)
	}

	ctrd.Stop(t)
	_, _, skipped, err = cri.Find(ctxT(t, time.Minute), cri.Candidates(root), 3*time.Second)
	t.Logf("containerd stopped: %v", err)
	if cri.Classify(err) != cri.KindRuntimeUnavailable || len(skipped) != 3 {
		t.Fatalf("Find with containerd stopped = %v (skipped %+v), want a RuntimeUnavailable error naming 3 sockets", err, skipped)
	}
	if !strings.Contains(skipped[0].Reason, "no such file") && !strings.Contains(skipped[0].Reason, "no gRPC server answers") {
		t.Errorf("the stopped containerd's socket was skipped because %q", skipped[0].Reason)
	}
}
