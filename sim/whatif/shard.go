package whatif

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// ShardFormat names the format of a shard file; a file of another format
// is refused by DecodeShard.
const ShardFormat = "bootroll.dev/whatif-shard/v1"

// Shard is one of Count parts of a sweep's runs. Run i (point i/seeds,
// seed offset i%seeds) belongs to shard i mod Count: round-robin, so the
// slow and the fast grid points (maxUnavailable 1 against 20%) are spread
// over every shard instead of landing on one.
type Shard struct {
	Index int
	Count int
}

// ParseShard parses "i/n", 0 <= i < n.
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(a))
	n, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("--shard %q: want i/n, e.g. 0/4 (shard i of n, counted from 0)", s)
	}
	sh := Shard{Index: i, Count: n}
	if err := sh.check(); err != nil {
		return Shard{}, fmt.Errorf("--shard %q: %w", s, err)
	}
	return sh, nil
}

func (s Shard) check() error {
	if s.Count < 1 || s.Index < 0 || s.Index >= s.Count {
		return fmt.Errorf("shard %d of %d: want 0 <= i < n", s.Index, s.Count)
	}
	return nil
}

// String returns "i/n".
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// FileName is the shard's file in --out: shard-i-of-n.json.
func (s Shard) FileName() string { return fmt.Sprintf("shard-%d-of-%d.json", s.Index, s.Count) }

// Runs returns the run indexes of the shard, ascending, of a sweep of
// total runs. A shard past the last run has none.
func (s Shard) Runs(total int) []int {
	idx := []int{}
	for i := s.Index; i < total; i += s.Count {
		idx = append(idx, i)
	}
	return idx
}

// ShardFile is the content of shard-i-of-n.json: the sweep's inputs, in
// full, and the summaries of the shard's runs, enough to rebuild the
// sweep's results exactly.
type ShardFile struct {
	Format string     `json:"format"`
	Shard  int        `json:"shard"`
	Shards int        `json:"shards"`
	Sweep  SweepInfo  `json:"sweep"`
	Runs   []ShardRun `json:"runs"`
}

// SweepInfo is what defines a sweep. Shards of one sweep have equal
// SweepInfo; Merge names the first field that differs.
type SweepInfo struct {
	Scenario       string   `json:"scenario"`
	File           string   `json:"file"`
	ScenarioSHA256 string   `json:"scenarioSHA256"`
	Sets           []string `json:"sets"`
	Axes           []Axis   `json:"axes"`
	Seeds          int      `json:"seeds"`
	FirstSeed      uint64   `json:"firstSeed"`
	Runs           int      `json:"runs"`
	// ScenarioData is the scenario file itself, so that a merge can
	// rebuild the plan (and replay a run) without the file.
	ScenarioData string `json:"scenarioData"`
}

// ShardRun is one run's summary: Measure's values by metric name.
type ShardRun struct {
	Index      int                `json:"index"`
	Seed       uint64             `json:"seed"`
	Metrics    map[string]float64 `json:"metrics"`
	Violations []RunViolation     `json:"violations,omitempty"`
}

// Info returns what defines the plan's sweep.
func (p *Plan) Info() SweepInfo {
	sum := sha256.Sum256(p.Data)
	sets := slices.Clone(p.Sets)
	if sets == nil {
		sets = []string{}
	}
	return SweepInfo{
		Scenario: p.Scenario, File: p.File, ScenarioSHA256: hex.EncodeToString(sum[:]),
		Sets: sets, Axes: p.Axes, Seeds: p.Seeds, FirstSeed: p.FirstSeed, Runs: p.Runs(),
		ScenarioData: string(p.Data),
	}
}

// NewShardFile holds a shard's runs, as RunShard returned them.
func NewShardFile(plan *Plan, sh Shard, runs []RunSummary) (*ShardFile, error) {
	idx := sh.Runs(plan.Runs())
	if len(idx) != len(runs) {
		return nil, fmt.Errorf("shard %s has %d runs, got %d summaries", sh, len(idx), len(runs))
	}
	f := &ShardFile{Format: ShardFormat, Shard: sh.Index, Shards: sh.Count, Sweep: plan.Info(), Runs: []ShardRun{}}
	for j, r := range runs {
		sr := ShardRun{Index: idx[j], Seed: r.Seed, Metrics: map[string]float64{}, Violations: r.Violations}
		for m := range numMetrics {
			if r.Has[m] {
				sr.Metrics[Metrics[m].Name] = r.Values[m]
			}
		}
		f.Runs = append(f.Runs, sr)
	}
	return f, nil
}

// Encode encodes the shard file. Floats are written in Go's shortest
// form, which decodes to the same float64, so merged results are exact.
func (f *ShardFile) Encode() ([]byte, error) {
	data, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return nil, fmt.Errorf("encoding shard %d of %d: %w", f.Shard, f.Shards, err)
	}
	return append(data, '\n'), nil
}

// DecodeShard decodes a shard file; name is for errors.
func DecodeShard(name string, data []byte) (*ShardFile, error) {
	var f ShardFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: not a whatif shard file: %w", name, err)
	}
	if f.Format != ShardFormat {
		return nil, fmt.Errorf("%s: format %q, want %q (a shard file of bootroll whatif --shard)", name, f.Format, ShardFormat)
	}
	if err := (Shard{f.Shard, f.Shards}).check(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	sum := sha256.Sum256([]byte(f.Sweep.ScenarioData))
	if hex.EncodeToString(sum[:]) != f.Sweep.ScenarioSHA256 {
		return nil, fmt.Errorf("%s: sweep.scenarioData does not match sweep.scenarioSHA256: the file was edited or cut", name)
	}
	return &f, nil
}

// NamedShard is a decoded shard file and where it came from.
type NamedShard struct {
	Name string
	File *ShardFile
}

// Merge checks that the shards are of one sweep and cover each of its runs
// exactly once, and summarises them as Run would have: it rebuilds the
// plan from the shards' inputs and calls Summarise on the runs in
// run-index order. The order of shards does not matter.
func Merge(shards []NamedShard) (*Plan, *Results, error) {
	if len(shards) == 0 {
		return nil, nil, fmt.Errorf("no shard files (shard-i-of-n.json) given")
	}
	shards = slices.Clone(shards)
	slices.SortStableFunc(shards, func(a, b NamedShard) int { return a.File.Shard - b.File.Shard })
	ref := shards[0]
	for _, s := range shards[1:] {
		if err := sameSweep(ref, s); err != nil {
			return nil, nil, err
		}
	}
	n := ref.File.Shards
	byIndex := make([][]string, n)
	for _, s := range shards {
		byIndex[s.File.Shard] = append(byIndex[s.File.Shard], s.Name)
	}
	var missing, twice []string
	for i, names := range byIndex {
		switch {
		case len(names) == 0:
			missing = append(missing, strconv.Itoa(i))
		case len(names) > 1:
			twice = append(twice, fmt.Sprintf("shard %d of %d is in %s", i, n, strings.Join(names, " and ")))
		}
	}
	if len(twice) > 0 {
		return nil, nil, fmt.Errorf("duplicate shards: %s; give each shard once", strings.Join(twice, "; "))
	}
	if len(missing) > 0 {
		return nil, nil, fmt.Errorf("missing shards %s of %d (indexes 0 to %d; have %d): every shard file shard-i-of-%d.json must be given", strings.Join(missing, ", "), n, n-1, len(shards), n)
	}
	info := ref.File.Sweep
	plan, err := Prepare(Spec{File: info.File, Data: []byte(info.ScenarioData), Axes: info.Axes, Sets: info.Sets, Seeds: info.Seeds, FirstSeed: info.FirstSeed})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: rebuilding the sweep from its inputs: %w", ref.Name, err)
	}
	if plan.Runs() != info.Runs || plan.Scenario != info.Scenario {
		return nil, nil, fmt.Errorf("%s: the sweep's inputs make %d runs of scenario %q, the file says %d of %q", ref.Name, plan.Runs(), plan.Scenario, info.Runs, info.Scenario)
	}
	runs := make([]RunSummary, plan.Runs())
	for _, s := range shards {
		sh := Shard{s.File.Shard, s.File.Shards}
		want := sh.Runs(plan.Runs())
		if len(s.File.Runs) != len(want) {
			return nil, nil, fmt.Errorf("%s: shard %s has %d runs, want %d", s.Name, sh, len(s.File.Runs), len(want))
		}
		for j, sr := range s.File.Runs {
			if sr.Index != want[j] {
				return nil, nil, fmt.Errorf("%s: run %d is index %d, want %d (shard %s holds runs i with i mod %d = %d)", s.Name, j, sr.Index, want[j], sh, sh.Count, sh.Index)
			}
			r, err := sr.summary(plan)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", s.Name, err)
			}
			runs[sr.Index] = r
		}
	}
	res, err := Summarise(plan, runs)
	if err != nil {
		return nil, nil, err
	}
	return plan, res, nil
}

// sameSweep names the first field in which b's sweep differs from a's.
func sameSweep(a, b NamedShard) error {
	if a.File.Shards != b.File.Shards {
		return fmt.Errorf("%s and %s are not shards of one sweep: shards differs (%d, %d)", a.Name, b.Name, a.File.Shards, b.File.Shards)
	}
	va, vb := reflect.ValueOf(a.File.Sweep), reflect.ValueOf(b.File.Sweep)
	for i := range va.NumField() {
		f := va.Type().Field(i)
		if reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Name == "ScenarioData" {
			// Equal hashes with different data cannot pass DecodeShard.
			return fmt.Errorf("%s and %s are not shards of one sweep: sweep.%s differs", a.Name, b.Name, name)
		}
		return fmt.Errorf("%s and %s are not shards of one sweep: sweep.%s differs (%s, %s)", a.Name, b.Name, name, short(va.Field(i).Interface()), short(vb.Field(i).Interface()))
	}
	return nil
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 120 {
		return string(b[:117]) + "..."
	}
	return string(b)
}

// summary turns a shard's run back into Measure's summary, checking its
// seed against the plan.
func (sr ShardRun) summary(plan *Plan) (RunSummary, error) {
	if sr.Index < 0 || sr.Index >= plan.Runs() {
		return RunSummary{}, fmt.Errorf("run index %d out of 0..%d", sr.Index, plan.Runs()-1)
	}
	if want := plan.Seed(sr.Index % plan.Seeds); sr.Seed != want {
		return RunSummary{}, fmt.Errorf("run %d has seed %d, want %d", sr.Index, sr.Seed, want)
	}
	r := RunSummary{Seed: sr.Seed, Violations: sr.Violations}
	for name, v := range sr.Metrics {
		m := metricByName(name)
		if m < 0 {
			return RunSummary{}, fmt.Errorf("run %d: unknown metric %q (a shard of another bootroll version?)", sr.Index, name)
		}
		r.set(m, v)
	}
	return r, nil
}

func metricByName(name string) Metric {
	for m := range numMetrics {
		if Metrics[m].Name == name {
			return m
		}
	}
	return -1
}
