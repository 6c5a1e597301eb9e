package rollout

import (
	"fmt"
	"time"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// WindowClose reports whether t falls in one of the maintenance windows
// (all in UTC, as InWindow reads them) and, when it does, the latest time
// one of the windows that hold t closes.
func WindowClose(windows []v1alpha1.MaintenanceWindow, t time.Time) (time.Time, bool) {
	t = t.UTC()
	var closes time.Time
	for _, w := range windows {
		var hh, mm int
		if _, err := fmt.Sscanf(w.Start, "%d:%d", &hh, &mm); err != nil {
			continue
		}
		// A window of at most 24h that holds t opened today or yesterday.
		for day := -1; day <= 0; day++ {
			d := t.AddDate(0, 0, day)
			open := time.Date(d.Year(), d.Month(), d.Day(), hh, mm, 0, 0, time.UTC)
			if !windowDay(w.Days, open.Weekday()) {
				continue
			}
			if end := open.Add(w.Duration.Duration); !t.Before(open) && t.Before(end) && end.After(closes) {
				closes = end
			}
		}
	}
	return closes, !closes.IsZero()
}
