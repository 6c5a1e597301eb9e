package localcluster

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStateRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	want := State{
		Kubeconfig: "/d/kubeconfig",
		Server:     "https://127.0.0.1:2003",
		Ports:      testPorts(),
		Processes: []Process{
			{Name: Etcd, PID: 100, Path: "/b/etcd", StartTicks: 5, Log: "/d/etcd.log"},
			{Name: APIServer, PID: 101, Path: "/b/kube-apiserver", StartTicks: 6, Log: "/d/kube-apiserver.log"},
		},
	}
	if err := WriteState(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadState(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Server != want.Server || got.Ports != want.Ports || len(got.Processes) != 2 || got.Processes[1] != want.Processes[1] {
		t.Errorf("ReadState = %+v, want %+v", got, want)
	}
}

func TestReadStateErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadState(filepath.Join(dir, "state.json")); !errors.Is(err, ErrNoState) {
		t.Errorf("missing file: %v, want ErrNoState", err)
	}
	for name, body := range map[string]string{
		"pid 1":   `{"processes":[{"name":"etcd","pid":1,"path":"/b/etcd"}]}`,
		"no path": `{"processes":[{"name":"etcd","pid":1234}]}`,
		"garbage": `{"processes":`,
	} {
		p := filepath.Join(dir, "s.json")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadState(p); err == nil || errors.Is(err, ErrNoState) {
			t.Errorf("%s: ReadState error %v, want a decoding or validation error", name, err)
		}
	}
}

func TestParseStat(t *testing.T) {
	// A command name with spaces and parentheses, as a process can choose.
	line := "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 987654 1000 10 18446744073709551615\n"
	st, ticks, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if st != "S" || ticks != 987654 {
		t.Errorf("parseStat = %q, %d; want S, 987654", st, ticks)
	}
	if _, _, err := parseStat("4242 (a) S 1 2"); err == nil {
		t.Errorf("short line: no error")
	}
}

func TestIdentifySelf(t *testing.T) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Skip("no /proc:", err)
	}
	info, ok, err := readProc(os.Getpid())
	if err != nil || !ok {
		t.Fatalf("readProc(self) = %v, %v", ok, err)
	}
	self := Process{Name: "test", PID: os.Getpid(), Path: exe, StartTicks: info.startTicks}
	for _, tc := range []struct {
		name string
		p    Process
		want bool
	}{
		{"same", self, true},
		{"other binary", Process{PID: self.PID, Path: "/bin/true", StartTicks: self.StartTicks}, false},
		{"reused pid", Process{PID: self.PID, Path: exe, StartTicks: self.StartTicks + 1}, false},
	} {
		got, err := identify(tc.p)
		if err != nil || got != tc.want {
			t.Errorf("%s: identify = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// startSleep starts a child that Down may or may not stop; the child is
// killed and reaped at the end of the test either way.
func startSleep(t *testing.T) (Process, chan struct{}) {
	t.Helper()
	path, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	path, _ = filepath.EvalSymlinks(path)
	cmd := exec.Command(path, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	info, ok, err := readProc(cmd.Process.Pid)
	if err != nil || !ok {
		t.Fatalf("readProc: %v %v", ok, err)
	}
	return Process{Name: "sleep", PID: cmd.Process.Pid, Path: path, StartTicks: info.startTicks}, done
}

func TestDownStopsOnlyItsOwn(t *testing.T) {
	ours, oursDone := startSleep(t)
	other, otherDone := startSleep(t)
	// The state says another binary ran under other's pid: a reused pid.
	other.Path = "/usr/bin/not-sleep"
	dir := t.TempDir()
	if err := WriteState(Layout{Dir: dir}.State(), State{Processes: []Process{ours, other}}); err != nil {
		t.Fatal(err)
	}
	var progress strings.Builder
	if err := Down(DownOptions{Dir: dir, Grace: 5 * time.Second, Progress: &progress}); err != nil {
		t.Fatalf("Down: %v", err)
	}
	select {
	case <-oursDone:
	case <-time.After(5 * time.Second):
		t.Errorf("Down left pid %d running", ours.PID)
	}
	select {
	case <-otherDone:
		t.Errorf("Down killed pid %d, which runs another binary than the state says", other.PID)
	default:
	}
	if err := syscall.Kill(other.PID, 0); err != nil {
		t.Errorf("pid %d: %v, want it alive", other.PID, err)
	}
	if _, err := os.Stat(Layout{Dir: dir}.State()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state.json after Down: %v, want it removed", err)
	}
	if err := Down(DownOptions{Dir: dir}); !errors.Is(err, ErrNoState) {
		t.Errorf("second Down: %v, want ErrNoState", err)
	}
}
