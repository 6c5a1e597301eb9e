package cri_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/bootroll/bootroll/nodedaemon/cri"
)

// shortDir is a temporary directory with a path short enough for unix
// sockets (about 100 bytes).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "crif")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// fakeCRI answers Version and ImageFsInfo, as a runtime does.
type fakeCRI struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer
	name string
}

func (f *fakeCRI) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: f.name, RuntimeVersion: "v9.9"}, nil
}

func (f *fakeCRI) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: "/"}}}}, nil
}

// serveGRPC serves register's services on a unix socket at path.
func serveGRPC(t *testing.T, path string, register func(*grpc.Server)) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	go srv.Serve(ln) // edge: test: a gRPC server beside the test
	t.Cleanup(srv.Stop)
}

func serveFakeCRI(t *testing.T, path, name string) {
	serveGRPC(t, path, func(s *grpc.Server) {
		f := &fakeCRI{name: name}
		runtimeapi.RegisterRuntimeServiceServer(s, f)
		runtimeapi.RegisterImageServiceServer(s, f)
	})
}

// serveSilent accepts connections and never answers: not gRPC.
func serveSilent(t *testing.T, path string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() { // edge: test: a listener that holds connections open
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
}

func TestCandidates(t *testing.T) {
	got := cri.Candidates("")
	want := []string{"/run/containerd/containerd.sock", "/var/run/crio/crio.sock", "/run/crio/crio.sock"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Candidates(\"\") = %v, want %v", got, want)
	}
	got = cri.Candidates("/host")
	want = []string{"/host/run/containerd/containerd.sock", "/host/var/run/crio/crio.sock", "/host/run/crio/crio.sock"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Candidates(/host) = %v, want %v", got, want)
	}
}

// TestFindSkipsWhatIsNotCRI: a missing path, a plain file, a socket that
// never answers and a gRPC server without the CRI are skipped, each with
// its reason, and the first CRI server after them is used.
func TestFindSkipsWhatIsNotCRI(t *testing.T) {
	d := shortDir(t)
	missing := filepath.Join(d, "missing.sock")
	file := filepath.Join(d, "file.sock")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	silent := filepath.Join(d, "silent.sock")
	serveSilent(t, silent)
	notCRI := filepath.Join(d, "grpc.sock")
	serveGRPC(t, notCRI, func(*grpc.Server) {})
	crio := filepath.Join(d, "crio.sock")
	serveFakeCRI(t, crio, "cri-o")
	later := filepath.Join(d, "later.sock")
	serveFakeCRI(t, later, "later")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, rt, skipped, err := cri.Find(ctx, []string{missing, file, silent, notCRI, crio, later}, time.Second)
	if err != nil {
		t.Fatalf("Find: %v", err)
	}
	defer c.Close()
	if rt.Socket != crio || rt.Name != "cri-o" || rt.Version != "v9.9" {
		t.Errorf("found %+v, want cri-o v9.9 at %s", rt, crio)
	}
	wantReasons := map[string]string{
		missing: "no such file",
		file:    "not a unix socket",
		silent:  "no gRPC server answers",
		notCRI:  "does not answer the CRI v1 RuntimeService.Version",
	}
	if len(skipped) != len(wantReasons) {
		t.Fatalf("skipped %+v, want the %d sockets before %s", skipped, len(wantReasons), crio)
	}
	for _, s := range skipped {
		t.Logf("skipped %s: %s", s.Socket, s.Reason)
		if !strings.Contains(s.Reason, wantReasons[s.Socket]) {
			t.Errorf("skipped %s because %q, want it to say %q", s.Socket, s.Reason, wantReasons[s.Socket])
		}
	}
}

func TestFindNone(t *testing.T) {
	d := shortDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, _, err := cri.Find(ctx, []string{filepath.Join(d, "a.sock"), filepath.Join(d, "b.sock")}, time.Second)
	var none *cri.NoRuntimeError
	if !errors.As(err, &none) || len(none.Skipped) != 2 {
		t.Fatalf("Find with no sockets = %v, want a NoRuntimeError naming both", err)
	}
	if got := cri.Classify(err); got != cri.KindRuntimeUnavailable {
		t.Errorf("Classify(%v) = %s, want RuntimeUnavailable", err, got)
	}
	if !strings.Contains(err.Error(), "a.sock: no such file") || !strings.Contains(err.Error(), "b.sock: no such file") {
		t.Errorf("error %q does not name each socket and why", err)
	}
}

// TestFinderBacksOff: after a failed search the Finder does not search
// again before the backoff has passed, then finds the runtime that came
// up meanwhile and keeps its connection.
func TestFinderBacksOff(t *testing.T) {
	d := shortDir(t)
	sock := filepath.Join(d, "ctrd.sock")
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var failures []time.Duration
	found := 0
	f := &cri.Finder{
		Sockets: []string{sock}, Clock: clk, ProbeTimeout: time.Second,
		RetryBase: 10 * time.Second, RetryMax: time.Minute,
		OnFailed: func(_ error, retryIn time.Duration) { failures = append(failures, retryIn) },
		OnFound:  func(cri.Runtime, []cri.Skipped) { found++ },
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if _, err := f.Client(ctx); cri.Classify(err) != cri.KindRuntimeUnavailable {
		t.Fatalf("Client with no runtime: %v, want a RuntimeUnavailable error", err)
	}
	serveFakeCRI(t, sock, "containerd")
	clk.SetTime(clk.Now().Add(9 * time.Second))
	if _, err := f.Client(ctx); err == nil {
		t.Fatal("the Finder searched again before its 10s backoff")
	}
	clk.SetTime(clk.Now().Add(time.Second))
	c, err := f.Client(ctx)
	if err != nil {
		t.Fatalf("Client after the backoff: %v", err)
	}
	if c2, err := f.Client(ctx); err != nil || c2 != c {
		t.Errorf("second Client = %p, %v; want the same connection %p", c2, err, c)
	}
	if len(failures) != 1 || failures[0] != 10*time.Second || found != 1 {
		t.Errorf("OnFailed %v, OnFound %d times; want one failure with retry 10s, one find", failures, found)
	}
}

func TestFinderBackoffGrows(t *testing.T) {
	d := shortDir(t)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var waits []time.Duration
	f := &cri.Finder{
		Sockets: []string{filepath.Join(d, "none.sock")}, Clock: clk,
		RetryBase: 10 * time.Second, RetryMax: 30 * time.Second,
		OnFailed: func(_ error, retryIn time.Duration) { waits = append(waits, retryIn) },
	}
	for range 4 {
		f.Client(context.Background())
		clk.SetTime(clk.Now().Add(time.Minute))
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second, 30 * time.Second}
	if len(waits) != len(want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	for i := range want {
		if waits[i] != want[i] {
			t.Errorf("waits %v, want %v", waits, want)
			break
		}
	}
}
