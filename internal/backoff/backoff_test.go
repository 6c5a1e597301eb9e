package backoff

import (
	"testing"
	"time"
)

func TestNth(t *testing.T) {
	const s = time.Second
	for _, c := range []struct {
		base, limit time.Duration
		n           int32
		want        time.Duration
	}{
		{30 * s, 30 * time.Minute, 0, 0},
		{30 * s, 30 * time.Minute, -1, 0},
		{30 * s, 30 * time.Minute, 1, 30 * s},
		{30 * s, 30 * time.Minute, 2, time.Minute},
		{30 * s, 30 * time.Minute, 3, 2 * time.Minute},
		{30 * s, 30 * time.Minute, 6, 16 * time.Minute},
		{30 * s, 30 * time.Minute, 7, 30 * time.Minute},
		{30 * s, 30 * time.Minute, 50, 30 * time.Minute},
		{30 * s, 10 * time.Minute, 5, 8 * time.Minute},
		{30 * s, 10 * time.Minute, 6, 10 * time.Minute},
		{30 * s, 10 * time.Minute, 1000, 10 * time.Minute},
		{time.Minute, 30 * s, 1, 30 * s}, // a base above the limit is capped
		{30 * s, 60 * s, 2, 60 * s},      // exactly at the cap
		{30 * s, 60 * s, 3, 60 * s},
	} {
		if got := Nth(c.base, c.limit, c.n); got != c.want {
			t.Errorf("Nth(%s, %s, %d) = %s, want %s", c.base, c.limit, c.n, got, c.want)
		}
	}
}
