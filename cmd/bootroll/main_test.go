package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const plain = "../../scenarios/plain-rollout-10.yaml"

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestRunPasses(t *testing.T) {
	code, out, errs := runCLI(t, "scenario", "run", plain, "--seed", "3")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if !regexp.MustCompile(`^plain-rollout-10 +PASS  virtual \S+ +wall \S+ +seed 3\n$`).MatchString(out) {
		t.Errorf("output %q", out)
	}
}

// TestRunViolation breaks the controller with --set: the run must exit 1,
// name the invariant, the time and the objects, and print a replay command
// that fails the same way.
func TestRunViolation(t *testing.T) {
	code, out, _ := runCLI(t, "scenario", "run", plain, "--set", "bootroll.testOnly.ignoreSlotLimit=true")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{"FAIL", "max-unavailable at ", "objects: BootcNodePool/workers, Node/",
		"replay: bootroll scenario run " + plain + " --seed 1 --set bootroll.testOnly.ignoreSlotLimit=true"} {
		if !strings.Contains(out, want) {
			t.Errorf("output has no %q:\n%s", want, out)
		}
	}
	m := regexp.MustCompile(`replay: bootroll (.*)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("no replay line")
	}
	code2, out2, _ := runCLI(t, strings.Fields(m[1])...)
	if code2 != 1 || stripWall(out2) != stripWall(out) {
		t.Errorf("replay exit %d, output\n%s\nwant\n%s", code2, out2, out)
	}
}

var wall = regexp.MustCompile(`wall \S+`)

func stripWall(s string) string { return wall.ReplaceAllString(s, "wall X") }

func TestRunBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	data, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(data), "limit: 2h", "limit: 2h\nlimmit: 3h", 1)
	if err := os.WriteFile(bad, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "scenario", "run", plain, bad)
	if code != 2 || out != "" {
		t.Fatalf("exit %d, stdout %q; want 2 and nothing run", code, out)
	}
	if !regexp.MustCompile(`bad\.yaml:\d+: limmit: `).MatchString(errs) {
		t.Errorf("stderr %q; want FILE:LINE: FIELD: message", errs)
	}
	code, _, errs = runCLI(t, "scenario", "run", plain, "--set", "bootroll.nope=1")
	if code != 2 || !strings.Contains(errs, "bootroll.nope") {
		t.Errorf("unknown --set path: exit %d, %q", code, errs)
	}
	if code, _, _ := runCLI(t, "scenario", "run", plain, "--bogus"); code != 2 {
		t.Errorf("unknown flag: exit %d", code)
	}
	if code, _, _ := runCLI(t, "scenario", "validate", bad); code != 2 {
		t.Errorf("validate of a bad file: exit %d", code)
	}
}

func TestNegativeControls(t *testing.T) {
	code, out, errs := runCLI(t, "scenario", "run", "--negative-controls", "../../scenarios/bad-image-halt-recover.yaml")
	if code != 0 || !strings.Contains(out, "negative control exceed-slots: caught by max-unavailable at ") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	// A control that breaks nothing is not caught, and that fails the run.
	dir := t.TempDir()
	f := filepath.Join(dir, "vacuous.yaml")
	data, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	text = text[:strings.Index(text, "negativeControls:")] + `negativeControls:
  - name: harmless
    set: ["description=nothing broken"]
    caughtBy: max-unavailable
`
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI(t, "scenario", "run", "--negative-controls", f)
	if code != 1 || !strings.Contains(out, "negative control harmless was not caught by max-unavailable") ||
		!strings.Contains(out, "--set 'description=nothing broken'") {
		t.Errorf("exit %d\n%s", code, out)
	}
}

func TestTraceReportBench(t *testing.T) {
	dir := t.TempDir()
	trace, rep := filepath.Join(dir, "t.jsonl"), filepath.Join(dir, "r")
	code, out, errs := runCLI(t, "scenario", "run", plain, "--trace", trace, "--report", rep, "--bench")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if !regexp.MustCompile(`bench: wall \S+ +virtual \S+ +events \d+ +events/s \d+ +peak heap [\d.]+ MiB`).MatchString(out) {
		t.Errorf("no bench line:\n%s", out)
	}
	for _, f := range []string{trace, filepath.Join(rep, "summary.json"), filepath.Join(rep, "report.html")} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	// Several scenarios: one trace and one report directory each.
	code, _, errs = runCLI(t, "scenario", "run", plain, "../../scenarios/pdb-blocks-drain.yaml", "--trace", filepath.Join(dir, "traces"), "--report", filepath.Join(dir, "reports"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, f := range []string{"traces/plain-rollout-10.jsonl", "traces/pdb-blocks-drain.jsonl", "reports/plain-rollout-10/report.html", "reports/pdb-blocks-drain/summary.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

func TestValidateAndList(t *testing.T) {
	code, out, errs := runCLI(t, "scenario", "validate", plain)
	if code != 0 || !strings.Contains(out, "ok: plain-rollout-10 (1 pool(s), 10 node(s), 2 negative control(s))") {
		t.Errorf("validate: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "scenario", "list", "../../scenarios")
	if code != 0 {
		t.Fatalf("list: exit %d\n%s", code, errs)
	}
	if !regexp.MustCompile(`(?m)^plain-rollout-10 +workers +10 +\S+plain-rollout-10.yaml +Ten workers`).MatchString(out) ||
		strings.Contains(out, "bench-1000") {
		t.Errorf("list:\n%s", out)
	}
	if code, _, _ := runCLI(t, "scenario", "list", t.TempDir()); code != 2 {
		t.Errorf("list of an empty directory: exit %d", code)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"bootroll.pools[0].maxUnavailable=20%": "'bootroll.pools[0].maxUnavailable=20%'",
		"a.b=true":                             "a.b=true",
		"it's":                                 `'it'\''s'`,
		"":                                     "''",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
