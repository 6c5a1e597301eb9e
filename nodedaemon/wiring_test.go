package nodedaemon_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/nodedaemon"
	"github.com/bootroll/bootroll/nodedaemon/prefetch"
)

const (
	modulePath = "github.com/bootroll/bootroll"
	wiringFile = "nodedaemon/wiring.go"
)

// built are what only Wire and Adapters (wiring.go) may build outside
// tests: the Daemon, the production host stack and the prefetch runner, by
// import path and name.
var built = map[string][]string{
	modulePath + "/nodedaemon":          {"New", "AsyncHost", "SpaceCheckedHost", "BootcHost"},
	modulePath + "/nodedaemon/prefetch": {"Runner"},
}

// sharers must wire the daemon with Wire and watch with Watches: the
// daemon binary and the twin.
var sharers = []string{"cmd/bootroll-daemon", "sim/twin"}

// TestOneWiring keeps the daemon binary and the twin on one wiring: outside
// tests, only nodedaemon/wiring.go calls New or builds an AsyncHost,
// SpaceCheckedHost, BootcHost or prefetch.Runner, and both the binary and
// the twin call Wire and Watches. A daemon field or edge wired by hand in
// either would then have to be wired by hand in the other.
func TestOneWiring(t *testing.T) {
	root := ".."
	fset := token.NewFileSet()
	uses := map[string]map[string]bool{} // folder -> "Wire", "Watches"
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir // another module (hack/tools)
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		dir := filepath.ToSlash(filepath.Dir(rel))
		for _, name := range builds(f, dir) {
			if rel != wiringFile {
				t.Errorf("%s builds %s: only %s may (nodedaemon.Wire), so that the daemon binary and the twin share it", rel, name, wiringFile)
			}
		}
		for _, name := range calls(f, modulePath+"/nodedaemon", "Wire", "Watches") {
			if uses[dir] == nil {
				uses[dir] = map[string]bool{}
			}
			uses[dir][name] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("read %d Go files: is the test running in nodedaemon/ of the module?", files)
	}
	for _, dir := range sharers {
		for _, fn := range []string{"Wire", "Watches"} {
			if !uses[dir][fn] {
				t.Errorf("%s does not call nodedaemon.%s: it must wire the daemon as the others do", dir, fn)
			}
		}
	}
}

// builds lists what f, in folder dir, builds of built: calls of New and
// composite literals of the types.
func builds(f *ast.File, dir string) []string {
	names := map[string]string{} // local name -> import path
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if _, ok := built[p]; !ok {
			continue
		}
		local := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			local = imp.Name.Name
		}
		names[local] = p
	}
	self := modulePath + "/" + dir // the file's own package, when it is one of built's
	var out []string
	match := func(e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.Ident:
			if _, ok := built[self]; ok && slices.Contains(built[self], e.Name) {
				return e.Name, true
			}
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok {
				if p, ok := names[x.Name]; ok && slices.Contains(built[p], e.Sel.Name) {
					return x.Name + "." + e.Sel.Name, true
				}
			}
		}
		return "", false
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ValueSpec:
			// var _ Host = BootcHost{}: a type check, nothing wired.
			return !(len(n.Names) == 1 && n.Names[0].Name == "_")
		case *ast.CallExpr:
			if name, ok := match(n.Fun); ok && strings.HasSuffix(name, "New") {
				out = append(out, name)
			}
		case *ast.CompositeLit:
			if name, ok := match(n.Type); ok && !strings.HasSuffix(name, "New") {
				out = append(out, name+"{}")
			}
		}
		return true
	})
	return out
}

// calls lists which of fns, functions of the package at path, f calls.
func calls(f *ast.File, path string, fns ...string) []string {
	local := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			local = path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				local = imp.Name.Name
			}
		}
	}
	if local == "" {
		return nil
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if s, ok := c.Fun.(*ast.SelectorExpr); ok {
				if x, ok := s.X.(*ast.Ident); ok && x.Name == local && slices.Contains(fns, s.Sel.Name) {
					out = append(out, s.Sel.Name)
				}
			}
		}
		return true
	})
	return out
}

// TestWireSettings: Wire hands the settings and the API reader to the
// Daemon, and leaves Prefetch nil (not a nil *prefetch.Runner, which the
// loop would call) when the node has no image service.
func TestWireSettings(t *testing.T) {
	reader := fakeReader{}
	edges := nodedaemon.Edges{Node: "n1", APIReader: reader, Clock: clocktesting.NewFakePassiveClock(time.Time{}), Log: logr.Discard()}
	cfg := nodedaemon.Config{Resync: time.Minute, StagingReserve: 1 << 30, ControlPlane: true, TestOnly: nodedaemon.TestOnly{ForgetLastReboot: true}}
	d := nodedaemon.Wire(edges, cfg)
	if d.Resync != cfg.Resync || d.StagingReserve != cfg.StagingReserve || !d.ControlPlane || d.TestOnly != cfg.TestOnly {
		t.Errorf("daemon settings %v %v %v %+v, want those of %+v", d.Resync, d.StagingReserve, d.ControlPlane, d.TestOnly, cfg)
	}
	if d.NodeReader != reader {
		t.Errorf("NodeReader = %v, want the API reader", d.NodeReader)
	}
	if d.Prefetch != nil {
		t.Errorf("Prefetch = %T without an image service, want nil", d.Prefetch)
	}

	edges.Host.Images = noImages{}
	var held *prefetch.Runner
	edges.Host.Hold = func(h *nodedaemon.AsyncHost, p *prefetch.Runner) (nodedaemon.Host, nodedaemon.Prefetcher) {
		held = p
		return h, p
	}
	d = nodedaemon.Wire(edges, cfg)
	if held == nil || held.Credentials == nil || d.Prefetch != nodedaemon.Prefetcher(held) {
		t.Errorf("Prefetch is not the runner Hold was given, or that runner has no pull-secret credentials")
	}
}

// TestWakeWatchEnqueuesItsNode: the wake watch's event enqueues the node's
// own request, as the BootcNode watch does for its events.
func TestWakeWatchEnqueuesItsNode(t *testing.T) {
	var wakes int
	for _, w := range nodedaemon.Watches("n1") {
		if !w.Wake {
			continue
		}
		wakes++
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		defer q.ShutDown()
		w.Handler.Generic(context.Background(), event.GenericEvent{Object: w.Object}, q)
		if q.Len() != 1 {
			t.Fatalf("queue length %d after a wake-up, want 1", q.Len())
		}
		if req, _ := q.Get(); req.Name != "n1" || req.Namespace != "" {
			t.Errorf("wake-up enqueued %v, want n1", req)
		}
	}
	if wakes != 1 {
		t.Errorf("%d wake watches, want 1", wakes)
	}
}

type fakeReader struct{ client.Reader }

type noImages struct{ prefetch.ImageService }
