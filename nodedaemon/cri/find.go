package cri

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/bootroll/bootroll/internal/backoff"
)

// WellKnownSockets are the CRI endpoints of the runtimes bootroll supports,
// in the order Find tries them: containerd's, then CRI-O's (its default
// /var/run/crio/crio.sock, and /run/crio/crio.sock for hosts where /var/run
// is not the usual symlink to /run).
var WellKnownSockets = []string{
	"/run/containerd/containerd.sock",
	"/var/run/crio/crio.sock",
	"/run/crio/crio.sock",
}

// Candidates are the sockets Find tries: WellKnownSockets as the daemon
// sees them, below hostRoot when the host's / is mounted there (the
// DaemonSet's --host-root=/host), else as they are.
func Candidates(hostRoot string) []string {
	out := make([]string, 0, len(WellKnownSockets))
	for _, s := range WellKnownSockets {
		if hostRoot != "" {
			s = filepath.Join(hostRoot, s)
		}
		out = append(out, s)
	}
	return out
}

// DefaultProbeTimeout bounds one probe of a socket: something that accepts
// the connection but never speaks gRPC must not hold the daemon.
const DefaultProbeTimeout = 5 * time.Second

// Runtime is what a socket that answered says of itself.
type Runtime struct {
	// Socket is the endpoint's absolute path.
	Socket string
	// Name and Version are the runtime's (RuntimeService.Version), e.g.
	// containerd and v1.6.20.
	Name, Version string
}

// Skipped is one socket Find did not use, and why.
type Skipped struct {
	Socket string
	Reason string
}

// NoRuntimeError is Find's error when no socket answers: it names each
// socket tried and why it was skipped. It classifies as
// KindRuntimeUnavailable.
type NoRuntimeError struct {
	Skipped []Skipped
}

func (e *NoRuntimeError) Error() string {
	if len(e.Skipped) == 0 {
		return "no CRI socket to try"
	}
	parts := make([]string, 0, len(e.Skipped))
	for _, s := range e.Skipped {
		parts = append(parts, s.Socket+": "+s.Reason)
	}
	return "no container runtime answers on a CRI socket: " + strings.Join(parts, "; ")
}

// Probe connects to socketPath and checks that it serves the CRI: the
// RuntimeService's Version (for the runtime's name) and the
// ImageService's ImageFsInfo, each within timeout. It returns the client
// (the caller closes it) or why the socket is not usable.
func Probe(ctx context.Context, socketPath string, timeout time.Duration) (*Client, Runtime, error) {
	fi, err := os.Stat(socketPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, Runtime{}, errors.New("no such file (the runtime is not installed, not running, or its directory is not mounted)")
	case err != nil:
		return nil, Runtime{}, err
	case fi.Mode().Type() != fs.ModeSocket:
		return nil, Runtime{}, fmt.Errorf("not a unix socket (mode %s)", fi.Mode())
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := Dial(pctx, socketPath)
	if err != nil {
		return nil, Runtime{}, fmt.Errorf("no gRPC server answers: %w", err)
	}
	rt, err := c.Runtime(pctx)
	if err != nil {
		c.Close()
		return nil, Runtime{}, fmt.Errorf("does not answer the CRI v1 RuntimeService.Version: %w", err)
	}
	if _, err := c.ImageFsInfo(pctx); err != nil {
		c.Close()
		return nil, Runtime{}, fmt.Errorf("%s %s does not answer the CRI v1 ImageService: %w", rt.Name, rt.Version, err)
	}
	return c, rt, nil
}

// Find returns a client of the first socket of sockets that answers Probe,
// what it found there, and why each socket before it was skipped. When
// none answers the error is a *NoRuntimeError.
func Find(ctx context.Context, sockets []string, timeout time.Duration) (*Client, Runtime, []Skipped, error) {
	var skipped []Skipped
	for _, s := range sockets {
		c, rt, err := Probe(ctx, s, timeout)
		if err == nil {
			return c, rt, skipped, nil
		}
		skipped = append(skipped, Skipped{Socket: s, Reason: err.Error()})
		if ctx.Err() != nil {
			break
		}
	}
	return nil, Runtime{}, skipped, &NoRuntimeError{Skipped: skipped}
}

// Finder holds the daemon's connection to its runtime: the first call of
// Client finds the socket (Find); a call after a failed search searches
// again once a backoff has passed (RetryBase doubling up to RetryMax, as
// internal/backoff computes it) and returns the last failure until then.
// Once connected it keeps the connection: gRPC reconnects to the same
// socket by itself when the runtime restarts, and calls fail with
// Unavailable (KindRuntimeUnavailable) while it is down.
//
// It is an edge of the daemon (it dials sockets); the clock only paces the
// searches. It is safe for concurrent use.
type Finder struct {
	// Sockets are tried in order (Candidates, or the one --cri-socket).
	Sockets []string
	// Clock paces the searches.
	Clock clock.PassiveClock
	// ProbeTimeout bounds each probe; 0 means DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// RetryBase and RetryMax are the backoff between failed searches; 0
	// means DefaultRetryBase and DefaultRetryMax.
	RetryBase, RetryMax time.Duration
	// OnFound, when set, is told of the runtime found and the sockets
	// skipped before it; OnFailed of each failed search and when the next
	// is due. The daemon logs them.
	OnFound  func(rt Runtime, skipped []Skipped)
	OnFailed func(err error, retryIn time.Duration)

	mu       sync.Mutex
	client   *Client
	failures int32
	next     time.Time
	lastErr  error
}

// The defaults of Finder's backoff.
const (
	DefaultRetryBase = 10 * time.Second
	DefaultRetryMax  = 5 * time.Minute
)

// Client returns the connected client, searching for the runtime first
// when there is none and the backoff allows; otherwise the last search's
// error (a *NoRuntimeError, KindRuntimeUnavailable).
func (f *Finder) Client(ctx context.Context) (*Client, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.client != nil {
		return f.client, nil
	}
	now := f.Clock.Now()
	if f.lastErr != nil && now.Before(f.next) {
		return nil, f.lastErr
	}
	timeout := f.ProbeTimeout
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	c, rt, skipped, err := Find(ctx, f.Sockets, timeout)
	if err != nil {
		f.failures++
		base, limit := f.RetryBase, f.RetryMax
		if base <= 0 {
			base = DefaultRetryBase
		}
		if limit <= 0 {
			limit = DefaultRetryMax
		}
		wait := backoff.Nth(base, limit, f.failures)
		f.next, f.lastErr = now.Add(wait), err
		if f.OnFailed != nil {
			f.OnFailed(err, wait)
		}
		return nil, err
	}
	f.client, f.failures, f.lastErr = c, 0, nil
	if f.OnFound != nil {
		f.OnFound(rt, skipped)
	}
	return c, nil
}

// Close closes the connection, if any.
func (f *Finder) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.client == nil {
		return nil
	}
	err := f.client.Close()
	f.client = nil
	return err
}
