package nodedaemon

import (
	"context"
	"errors"
	"testing"
)

type stageRecorder struct {
	Host
	staged []string
}

func (s *stageRecorder) Stage(_ context.Context, image string) error {
	s.staged = append(s.staged, image)
	return nil
}

func TestSpaceCheckedHostStage(t *testing.T) {
	const gib = int64(1) << 30
	tests := []struct {
		name       string
		size, free int64
		sizeErr    error
		wantStaged bool
	}{
		{"fits with room for unpacking", 2 * gib, 5 * gib, nil, true},
		{"exactly twice fits", 2 * gib, 4 * gib, nil, true},
		{"does not fit twice", 2 * gib, 3 * gib, nil, false},
		{"unknown size: bootc decides", 0, 1, errors.New("registry down"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &stageRecorder{}
			h := SpaceCheckedHost{Host: rec,
				Size:      func(context.Context, string) (int64, error) { return tt.size, tt.sizeErr },
				Available: func(context.Context) (int64, error) { return tt.free, nil },
			}
			err := h.Stage(context.Background(), "registry.example/os@sha256:abc")
			if got := len(rec.staged) == 1; got != tt.wantStaged {
				t.Fatalf("staged = %v, want %v (err %v)", got, tt.wantStaged, err)
			}
			var ns *ErrNoSpace
			if !tt.wantStaged && (!errors.As(err, &ns) || ns.Need != 2*tt.size) {
				t.Fatalf("err = %v, want ErrNoSpace needing %d", err, 2*tt.size)
			}
		})
	}
}
