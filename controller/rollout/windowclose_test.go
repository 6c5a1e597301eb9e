package rollout

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

func TestWindowClose(t *testing.T) {
	win := func(start string, d time.Duration, days ...v1alpha1.Weekday) v1alpha1.MaintenanceWindow {
		return v1alpha1.MaintenanceWindow{Start: start, Duration: metav1.Duration{Duration: d}, Days: days}
	}
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		name    string
		windows []v1alpha1.MaintenanceWindow
		t       string
		closes  string // "" when outside every window
	}{
		{"no windows", nil, "2026-01-05T01:00:00Z", ""},
		{"inside", []v1alpha1.MaintenanceWindow{win("00:55", 2*time.Hour)}, "2026-01-05T01:00:00Z", "2026-01-05T02:55:00Z"},
		{"at the open", []v1alpha1.MaintenanceWindow{win("00:55", 2*time.Hour)}, "2026-01-05T00:55:00Z", "2026-01-05T02:55:00Z"},
		{"at the close, excluded", []v1alpha1.MaintenanceWindow{win("00:55", 2*time.Hour)}, "2026-01-05T02:55:00Z", ""},
		{"before", []v1alpha1.MaintenanceWindow{win("00:55", 2*time.Hour)}, "2026-01-05T00:54:59Z", ""},
		{"opened yesterday, past midnight", []v1alpha1.MaintenanceWindow{win("23:00", 3*time.Hour)}, "2026-01-06T01:00:00Z", "2026-01-06T02:00:00Z"},
		{"the later close of two", []v1alpha1.MaintenanceWindow{win("01:00", time.Hour), win("00:30", 4*time.Hour)}, "2026-01-05T01:30:00Z", "2026-01-05T04:30:00Z"},
		// 2026-01-05 is a Monday.
		{"not on its day", []v1alpha1.MaintenanceWindow{win("00:55", 2*time.Hour, "Tue")}, "2026-01-05T01:00:00Z", ""},
		{"on its day", []v1alpha1.MaintenanceWindow{win("00:55", 2*time.Hour, "Mon")}, "2026-01-05T01:00:00Z", "2026-01-05T02:55:00Z"},
		{"opened on its day, runs into the next", []v1alpha1.MaintenanceWindow{win("22:00", 4*time.Hour, "Sun")}, "2026-01-05T01:00:00Z", "2026-01-05T02:00:00Z"},
	} {
		closes, in := WindowClose(c.windows, at(c.t))
		if in != (c.closes != "") || (in && !closes.Equal(at(c.closes))) {
			t.Errorf("%s: WindowClose(%s) = %s, %v; want %q", c.name, c.t, closes, in, c.closes)
		}
		if inside, _ := InWindow(c.windows, at(c.t)); len(c.windows) > 0 && inside != in {
			t.Errorf("%s: WindowClose says inside %v, InWindow %v", c.name, in, inside)
		}
	}
}
