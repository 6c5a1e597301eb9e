package whatif

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// The formatting rules of report.html (see report.go), read back here
// independently of show: a duration is a Go duration rounded to the
// second, a percentage has one decimal and a %, millicores are shown as
// cores with two decimals, anything else is rounded to one decimal.
func parseShown(unit, text string) (v, tol float64, err error) {
	switch unit {
	case "s":
		d, err := time.ParseDuration(text)
		return d.Seconds(), 0.5, err
	case "%":
		if !strings.HasSuffix(text, "%") {
			return 0, 0, fmt.Errorf("%q: no %%", text)
		}
		v, err := strconv.ParseFloat(strings.TrimSuffix(text, "%"), 64)
		return v, 0.05, err
	case "millicores":
		if !strings.HasSuffix(text, " cores") {
			return 0, 0, fmt.Errorf("%q: not in cores", text)
		}
		v, err := strconv.ParseFloat(strings.TrimSuffix(text, " cores"), 64)
		return v * 1000, 5, err
	}
	v, err = strconv.ParseFloat(text, 64)
	return v, 0.05, err
}

// browser returns Chromium's path; the test fails without it unless
// BOOTROLL_SKIP_BROWSER=1.
func browser(t *testing.T) string {
	t.Helper()
	if os.Getenv("BOOTROLL_SKIP_BROWSER") == "1" {
		t.Skip("BOOTROLL_SKIP_BROWSER=1: not rendering report.html in Chromium")
	}
	name := os.Getenv("BOOTROLL_CHROMIUM")
	if name == "" {
		name = "chromium"
	}
	path, err := exec.LookPath(name)
	if err != nil && testing.Short() {
		t.Skipf("-short: %s not found (make test installs it; make unit does not need it)", name)
	}
	if err != nil {
		t.Fatalf("%s not found: the report test renders report.html in headless Chromium. `make test` installs Debian's chromium (hack/ensure-chromium.sh, as root; or: sudo apt-get install -y chromium); BOOTROLL_SKIP_BROWSER=1 skips this test", name)
	}
	return path
}

// chromium runs headless Chromium on a file with extra flags and returns
// its stdout.
func chromium(t *testing.T, bin, file string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	profile := t.TempDir()
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir=" + profile}
	flags = append(append(flags, args...), "file://"+file)
	cmd := exec.CommandContext(ctx, bin, flags...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(flags, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// sweep runs a plan with timelines and writes its files into a directory
// (BOOTROLL_REPORT_OUT keeps them), returning the directory.
func sweep(t *testing.T, p *Plan) string {
	t.Helper()
	res, err := Run(p, Config{Jobs: 2, Replay: replay})
	if err != nil {
		t.Fatal(err)
	}
	if err := AttachTimelines(p, res, 2); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if keep := os.Getenv("BOOTROLL_REPORT_OUT"); keep != "" {
		dir = filepath.Join(keep, t.Name())
	}
	if err := res.Write(dir); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func readResults(t *testing.T, dir string) *Results {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res Results
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	return &res
}

// TestReportInBrowser renders a 2 values × 2 seeds sweep's report.html in
// headless Chromium and checks the page against results.json, then takes
// a screenshot.
func TestReportInBrowser(t *testing.T) {
	bin := browser(t)
	dir := sweep(t, plan(t, 2, "bootroll.pools[0].maxUnavailable=1,3"))
	res := readResults(t, dir)
	file := filepath.Join(dir, "report.html")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dom := chromium(t, bin, file, "--dump-dom")
	if !bytes.Contains(dom, []byte("<svg")) {
		t.Fatalf("Chromium's DOM has no <svg>:\n%.2000s", dom)
	}
	for name, page := range map[string][]byte{"report.html": raw, "the DOM": dom} {
		t.Run(name, func(t *testing.T) { checkPage(t, page, res) })
	}

	shot := filepath.Join(dir, "screenshot.png")
	chromium(t, bin, file, "--window-size=1280,2000", "--screenshot="+shot)
	checkScreenshot(t, shot)
	t.Logf("screenshot: %s", shot)
}

// TestReportFromResults: the page is a function of the results alone (a
// merge that reads results.json back gives the same page), and a 2-D grid
// with violations has its lines, rows and hooks. No browser: the checks
// read the page as written.
func TestReportFromResults(t *testing.T) {
	dir := sweep(t, plan(t, 2, "bootroll.testOnly.ignoreSlotLimit=false,true", "bootroll.pools[0].maxUnavailable=1,2"))
	res := readResults(t, dir)
	raw, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := Report(res)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, again) {
		t.Errorf("report.html from results.json read back differs from the sweep's")
	}
	c := checkPage(t, raw, res)
	if c.violations == 0 {
		t.Errorf("no violation rows, want those of ignoreSlotLimit=true")
	}
	if got := strings.Count(string(raw), `class="p50"`); got < 2 {
		t.Errorf("%d p50 lines, want one per maxUnavailable value at least", got)
	}
}

type pageCounts struct {
	table, circles, timelines, violations, charts int
}

// checkPage checks every hooked number of a page against res, that every
// number shown is hooked (or a tick, a name or a path), that the charts are
// inline SVG, and that the page references nothing outside itself.
func checkPage(t *testing.T, page []byte, res *Results) pageCounts {
	t.Helper()
	for _, bad := range []string{"http:", "https:", "<script", "<link", "<img", "<iframe", "@import", "url("} {
		if i := bytes.Index(bytes.ToLower(page), []byte(bad)); i >= 0 {
			t.Errorf("the page has %q: %.120s", bad, page[i:])
		}
	}
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	units := map[string]string{}
	for _, m := range res.Metrics {
		units[m.Name] = m.Unit
	}
	var c pageCounts
	stat := func(i int, metric, which string) (float64, bool) {
		s, ok := res.Points[i].getName(metric)
		switch which {
		case "p5":
			return s.P5, ok
		case "p50":
			return s.P50, ok
		case "p95":
			return s.P95, ok
		}
		t.Errorf("data-stat %q", which)
		return 0, false
	}
	number := func(what, unit, text string, want float64) {
		got, tol, err := parseShown(unit, text)
		if err != nil {
			t.Errorf("%s: %q: %v", what, text, err)
		} else if math.Abs(got-want) > tol+1e-9 {
			t.Errorf("%s: page shows %q (%v), results.json has %v", what, text, got, want)
		}
	}
	titleRE := regexp.MustCompile(`: p50 (.+), p5–p95 (.+) – (.+)$`)
	var walk func(n *html.Node, hooked bool)
	walk = func(n *html.Node, hooked bool) {
		if n.Type == html.TextNode {
			if !hooked && strings.ContainsAny(n.Data, "0123456789") {
				t.Errorf("a number without a hook: %q in <%s>", strings.TrimSpace(n.Data), n.Parent.Data)
			}
			return
		}
		if n.Type == html.ElementNode {
			a := attrs(n)
			_, hasPoint := a["data-point"]
			switch n.Data {
			case "style", "code", "title":
				hooked = true
			case "svg":
				c.charts++
			}
			if strings.Contains(" "+a["class"]+" ", " tick ") || strings.Contains(" "+a["class"]+" ", " name ") || strings.Contains(" "+a["class"]+" ", " note ") {
				hooked = true
			}
			text := strings.TrimSpace(textOf(n))
			if hasPoint {
				hooked = true
				i, err := strconv.Atoi(a["data-point"])
				if err != nil || i < 0 || i >= len(res.Points) {
					t.Fatalf("data-point %q", a["data-point"])
				}
				pt := &res.Points[i]
				what := fmt.Sprintf("point %d %v", i, a)
				switch {
				case a["data-axis"] != "":
					k, _ := strconv.Atoi(a["data-axis"])
					if text != pt.Values[k] {
						t.Errorf("%s: %q, want %q", what, text, pt.Values[k])
					}
				case a["data-violation"] != "":
					k, _ := strconv.Atoi(a["data-violation"])
					v := pt.Violations[k]
					c.violations++
					switch a["data-field"] {
					case "seed":
						number(what, "", text, float64(v.Seed))
					case "count":
						number(what, "", text, float64(v.Count))
					case "atSeconds":
						number(what, "s", text, v.AtSeconds)
					default:
						t.Errorf("%s: unknown field", what)
					}
				case a["data-field"] == "medianSeed":
					c.timelines++
					number(what, "", text, float64(pt.MedianSeed))
				case a["data-stat"] == "none":
					if _, ok := pt.getName(a["data-metric"]); ok || text != "-" {
						t.Errorf("%s: %q for a metric the point has", what, text)
					}
				case a["data-stat"] == "p50 p5 p95":
					c.circles++
					m := titleRE.FindStringSubmatch(text)
					if m == nil {
						t.Errorf("%s: title %q", what, text)
						break
					}
					for k, which := range []string{"p50", "p5", "p95"} {
						want, ok := stat(i, a["data-metric"], which)
						if !ok {
							t.Errorf("%s: the point has no %s", what, a["data-metric"])
						}
						number(what+" "+which, units[a["data-metric"]], m[k+1], want)
					}
				case a["data-stat"] != "":
					if a["data-stat"] == "p50" {
						c.table++
					}
					want, ok := stat(i, a["data-metric"], a["data-stat"])
					if !ok {
						t.Errorf("%s: the point has no %s", what, a["data-metric"])
					}
					number(what, units[a["data-metric"]], text, want)
				default:
					t.Errorf("%s: a hook the test does not know", what)
				}
			} else if f := a["data-field"]; f != "" {
				hooked = true
				want := map[string]float64{"seeds": float64(res.Seeds), "firstSeed": float64(res.FirstSeed),
					"lastSeed": float64(res.FirstSeed) + float64(res.Seeds) - 1, "runs": float64(res.Runs)}
				w, ok := want[f]
				if !ok {
					t.Errorf("unknown data-field %q", f)
				}
				number("field "+f, "", text, w)
			} else if ax, ok := a["data-axis"]; ok {
				hooked = true
				i, _ := strconv.Atoi(ax)
				k, _ := strconv.Atoi(a["data-value"])
				if text != res.Axes[i].Values[k] {
					t.Errorf("axis %d value %d: %q, want %q", i, k, text, res.Axes[i].Values[k])
				}
			}
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch, hooked)
		}
	}
	walk(doc, false)

	// Every point has its row, every measured metric its chart with a
	// marker per point, every point with a median run its timeline.
	wantTable, wantCircles, wantTimelines, wantCharts, wantViolations := 0, 0, 0, 0, 0
	for _, mi := range res.Metrics {
		n := 0
		for i := range res.Points {
			if _, ok := res.Points[i].getName(mi.Name); ok {
				n++
			}
		}
		wantCircles += n
		if n > 0 {
			wantCharts++
		}
	}
	for i := range res.Points {
		if res.Points[i].MedianRun != nil {
			wantTimelines++
			wantCharts++
			wantTable++ // the timeline's rollout duration is the p50
		}
		wantViolations += 3 * len(res.Points[i].Violations)
		for _, m := range tableMetrics {
			if _, ok := res.Points[i].Get(m); ok {
				wantTable++
			}
		}
	}
	if c.table != wantTable || c.circles != wantCircles || c.timelines != wantTimelines || c.charts != wantCharts || c.violations != wantViolations {
		t.Errorf("hooks: %d p50 in the table and timelines, %d chart markers, %d timelines, %d inline <svg>, %d violation fields; want %d, %d, %d, %d, %d",
			c.table, c.circles, c.timelines, c.charts, c.violations, wantTable, wantCircles, wantTimelines, wantCharts, wantViolations)
	}
	return c
}

func attrs(n *html.Node) map[string]string {
	m := map[string]string{}
	for _, a := range n.Attr {
		m[a.Key] = a.Val
	}
	return m
}

func textOf(n *html.Node) string {
	var b strings.Builder
	var f func(*html.Node)
	f = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			f(ch)
		}
	}
	f(n)
	return b.String()
}

// checkScreenshot: a 1280×2000 PNG of some size with more than a few
// colours (a blank or error page is one or two).
func checkScreenshot(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() < 20_000 {
		t.Errorf("screenshot %s is %d bytes: too small for a page of tables and charts", path, fi.Size())
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	img, err := png.Decode(fh)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 2000 {
		t.Errorf("screenshot is %dx%d, want 1280x2000", b.Dx(), b.Dy())
	}
	colours := map[[4]uint32]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bl, a := img.At(x, y).RGBA()
			colours[[4]uint32{r, g, bl, a}]++
		}
	}
	nonWhite := 0
	for c, n := range colours {
		if c != [4]uint32{0xffff, 0xffff, 0xffff, 0xffff} {
			nonWhite += n
		}
	}
	if len(colours) < 16 || nonWhite < 2000 {
		t.Errorf("screenshot %s: %d colours, %d sampled pixels not white: a blank page?", path, len(colours), nonWhite)
	}
}

// TestAxisTicksFitTheMargin: a value axis's unit and tick labels stay
// readable for every magnitude a sweep measures (a 200-node pool's
// memory is about 3.2 million MiB; its label used to run into the axis
// title).
func TestAxisTicksFitTheMargin(t *testing.T) {
	for _, c := range []struct {
		unit     string
		top      float64
		wantUnit string
		wantTop  string
	}{
		{"MiB", 3_276_800, "GiB", "4000"},
		{"MiB", 64 << 20, "TiB", "80"},
		{"MiB", 900, "MiB", "1000"},
		{"millicores", 800_000, "cores", "800"},
		{"s", 23_400, "min", "400"},
		{"s", 90, "s", "100"},
		{"writes", 45_000, "writes", "80k"},
		{"writes", 99_000, "writes", "100k"},
		{"requests", 2_500_000, "requests", "4M"},
	} {
		unit, div := axisScale(c.unit, c.top)
		top := niceTop(c.top / div)
		if unit != c.wantUnit || tickLabel(top) != c.wantTop {
			t.Errorf("%g %s: axis in %s, top tick %q; want %s, %q", c.top, c.unit, unit, tickLabel(top), c.wantUnit, c.wantTop)
		}
		for i := 0; i <= 4; i++ {
			if l := tickLabel(top * float64(i) / 4); len(l) > 5 {
				t.Errorf("%g %s: tick %q is wider than 5 characters", c.top, c.unit, l)
			}
		}
	}
}
