package localcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// State is what `cluster up` started, written to state.json in the cluster
// directory so that `cluster down` stops exactly those processes.
type State struct {
	Kubeconfig string    `json:"kubeconfig"`
	Server     string    `json:"server"`
	Ports      Ports     `json:"ports"`
	Processes  []Process `json:"processes"`
}

// Process identifies one started process: its pid, the binary it runs and
// its start time in clock ticks since boot (field 22 of /proc/PID/stat),
// so that a pid reused by another process after ours exited is not ours.
type Process struct {
	Name       string `json:"name"`
	PID        int    `json:"pid"`
	Path       string `json:"path"`
	StartTicks uint64 `json:"startTicks"`
	Log        string `json:"log"`
}

// WriteState writes s to path (atomically: a rename).
func WriteState(path string, s State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the cluster state: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// ErrNoState is returned by ReadState when the directory holds no
// state.json: nothing was started there, or it was stopped.
var ErrNoState = errors.New("no state.json: no cluster started in this directory, or it was stopped")

// ReadState reads the state file at path.
func ReadState(path string) (State, error) {
	var s State
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, fmt.Errorf("%s: %w", path, ErrNoState)
	}
	if err != nil {
		return s, fmt.Errorf("reading the cluster state: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	for i, p := range s.Processes {
		if p.PID <= 1 || p.Path == "" {
			return s, fmt.Errorf("%s: processes[%d] (%s): pid %d, path %q: want a pid above 1 and a path", path, i, p.Name, p.PID, p.Path)
		}
	}
	return s, nil
}

// procInfo is what /proc says of a live process.
type procInfo struct {
	exe        string
	startTicks uint64
	zombie     bool
}

// readProc reads /proc/PID; ok is false when no such process exists.
func readProc(pid int) (info procInfo, ok bool, err error) {
	dir := "/proc/" + strconv.Itoa(pid)
	stat, err := os.ReadFile(dir + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return info, false, nil
	}
	if err != nil {
		return info, false, fmt.Errorf("reading %s/stat: %w", dir, err)
	}
	st, ticks, err := parseStat(string(stat))
	if err != nil {
		return info, false, fmt.Errorf("%s/stat: %w", dir, err)
	}
	info.startTicks = ticks
	info.zombie = st == "Z" || st == "X"
	if info.zombie {
		return info, true, nil // a zombie has no exe link
	}
	exe, err := os.Readlink(dir + "/exe")
	if errors.Is(err, os.ErrNotExist) {
		return info, false, nil // exited between the two reads
	}
	if err != nil {
		return info, false, fmt.Errorf("reading %s/exe: %w", dir, err)
	}
	// A binary rebuilt (replaced) while running reads "PATH (deleted)".
	info.exe = strings.TrimSuffix(exe, " (deleted)")
	return info, true, nil
}

// parseStat returns the state (field 3) and start time (field 22) of a
// /proc/PID/stat line. The command name (field 2) is in parentheses and
// may hold spaces and parentheses, so fields are counted after the last ')'.
func parseStat(line string) (state string, startTicks uint64, err error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return "", 0, fmt.Errorf("no ')' in %q", line)
	}
	f := strings.Fields(line[i+1:])
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 {
		return "", 0, fmt.Errorf("%d fields after the command name, want at least 20", len(f))
	}
	startTicks, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("start time %q: %w", f[19], err)
	}
	return f[0], startTicks, nil
}

// identify tells whether p is still running as the process that was
// started: same pid, same binary, same start time. A zombie counts as gone.
func identify(p Process) (running bool, err error) {
	info, ok, err := readProc(p.PID)
	if err != nil || !ok || info.zombie {
		return false, err
	}
	return info.exe == p.Path && info.startTicks == p.StartTicks, nil
}
