package fakekarpenter

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// budget is one parsed disruption budget.
type budget struct {
	percent  bool
	value    int
	schedule *cronSchedule
	duration time.Duration
	reasons  []string
}

func parseBudget(b budgetSpec) (budget, error) {
	var out budget
	nodes := b.Nodes
	if nodes == "" {
		nodes = "10%"
	}
	if p, ok := strings.CutSuffix(nodes, "%"); ok {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || v > 100 {
			return out, fmt.Errorf("nodes: %q is not a percentage from 0%% to 100%%", nodes)
		}
		out.percent, out.value = true, v
	} else {
		v, err := strconv.Atoi(nodes)
		if err != nil || v < 0 {
			return out, fmt.Errorf("nodes: %q is neither a count nor a percentage", nodes)
		}
		out.value = v
	}
	if (b.Schedule == nil) != (b.Duration == nil) {
		return out, fmt.Errorf("'schedule' must be set with 'duration'")
	}
	if b.Schedule != nil {
		s, err := parseCron(*b.Schedule)
		if err != nil {
			return out, fmt.Errorf("schedule: %w", err)
		}
		d, err := time.ParseDuration(*b.Duration)
		if err != nil || d <= 0 {
			return out, fmt.Errorf("duration: %q is not a positive duration", *b.Duration)
		}
		out.schedule, out.duration = s, d
	}
	out.reasons = b.Reasons
	return out, nil
}

// active reports whether the budget applies at now: always without a
// schedule, else when the schedule hit within the last duration (as
// Karpenter's Budget.IsActive, in UTC).
func (b budget) active(now time.Time) bool {
	if b.schedule == nil {
		return true
	}
	return b.schedule.hitIn(now.Add(-b.duration), now)
}

// appliesTo reports whether the budget limits disruptions for reason: a
// budget without reasons limits every reason.
func (b budget) appliesTo(reason string) bool {
	return len(b.reasons) == 0 || slices.Contains(b.reasons, reason)
}

// allowed is the number of nodes the budget lets be disrupting out of
// numNodes; a percentage rounds up.
func (b budget) allowed(numNodes int) int {
	if !b.percent {
		return b.value
	}
	return (b.value*numNodes + 99) / 100
}

// allowedDisruptions is the most restrictive active budget of np for reason,
// or MaxInt when none applies.
func (np *nodePool) allowedDisruptions(now time.Time, numNodes int, reason string) int {
	out := math.MaxInt
	for _, b := range np.budgets {
		if b.appliesTo(reason) && b.active(now) {
			out = min(out, b.allowed(numNodes))
		}
	}
	return out
}

// cronSchedule is a standard five-field cron schedule in UTC: minute, hour,
// day of month, month, day of week, each "*", a number, a range "a-b", a
// step "*/n" or "a-b/n", or a comma list of these; or one of the macros
// @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly. Month
// and weekday names are not supported.
type cronSchedule struct {
	minute  [60]bool
	hour    [24]bool
	dom     [32]bool
	month   [13]bool
	dow     [7]bool
	domStar bool
	dowStar bool
}

var cronMacros = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

func parseCron(spec string) (*cronSchedule, error) {
	s := strings.TrimSpace(spec)
	if m, ok := cronMacros[s]; ok {
		s = m
	}
	f := strings.Fields(s)
	if len(f) != 5 {
		return nil, fmt.Errorf("%q: want 5 fields (minute hour day-of-month month day-of-week) or a macro", spec)
	}
	c := &cronSchedule{domStar: f[2] == "*" || f[2] == "?", dowStar: f[4] == "*" || f[4] == "?"}
	fields := []struct {
		text     string
		lo, hi   int
		set      func(int)
		fieldFor string
	}{
		{f[0], 0, 59, func(i int) { c.minute[i] = true }, "minute"},
		{f[1], 0, 23, func(i int) { c.hour[i] = true }, "hour"},
		{f[2], 1, 31, func(i int) { c.dom[i] = true }, "day of month"},
		{f[3], 1, 12, func(i int) { c.month[i] = true }, "month"},
		{f[4], 0, 7, func(i int) { c.dow[i%7] = true }, "day of week"},
	}
	for _, fl := range fields {
		if err := parseCronField(fl.text, fl.lo, fl.hi, fl.set); err != nil {
			return nil, fmt.Errorf("%q: %s: %w", spec, fl.fieldFor, err)
		}
	}
	return c, nil
}

func parseCronField(text string, lo, hi int, set func(int)) error {
	for _, part := range strings.Split(text, ",") {
		rng, stepText, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n <= 0 {
				return fmt.Errorf("bad step %q", stepText)
			}
			step = n
		}
		from, to := lo, hi
		switch {
		case rng == "*" || rng == "?":
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			x, err1 := strconv.Atoi(a)
			y, err2 := strconv.Atoi(b)
			if err1 != nil || err2 != nil || x < lo || y > hi || x > y {
				return fmt.Errorf("bad range %q", rng)
			}
			from, to = x, y
		default:
			x, err := strconv.Atoi(rng)
			if err != nil || x < lo || x > hi {
				return fmt.Errorf("bad value %q (want %d-%d)", rng, lo, hi)
			}
			from, to = x, x
			if hasStep {
				to = hi
			}
		}
		for i := from; i <= to; i += step {
			set(i)
		}
	}
	return nil
}

// dayMatches reports whether the schedule fires on day d; as in cron, when
// both day fields are restricted either may match.
func (c *cronSchedule) dayMatches(d time.Time) bool {
	if !c.month[int(d.Month())] {
		return false
	}
	dom, dow := c.dom[d.Day()], c.dow[int(d.Weekday())]
	if c.domStar || c.dowStar {
		return dom && dow
	}
	return dom || dow
}

// hitIn reports whether the schedule fires at some minute in (after, now].
func (c *cronSchedule) hitIn(after, now time.Time) bool {
	after, now = after.UTC(), now.UTC()
	last := now.Truncate(time.Minute)
	day := time.Date(last.Year(), last.Month(), last.Day(), 0, 0, 0, 0, time.UTC)
	for ; day.Add(24 * time.Hour).After(after); day = day.AddDate(0, 0, -1) {
		if !c.dayMatches(day) {
			continue
		}
		for h := 23; h >= 0; h-- {
			if !c.hour[h] {
				continue
			}
			for m := 59; m >= 0; m-- {
				if !c.minute[m] {
					continue
				}
				t := day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
				if t.After(last) {
					continue
				}
				// The latest hit at or before now: active iff it is
				// within the window.
				return t.After(after)
			}
		}
	}
	return false
}
