package bootc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/bootroll/bootroll/internal/imageref"
)

// Runner runs a host command and returns its stdout; stderr goes into the error.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// Errors that callers may want to tell apart with errors.Is.
var (
	// ErrDownloadOnlyUnsupported means the host's bootc cannot stage an image
	// without also arming it for the next boot (`bootc switch
	// --download-only` arrived in bootc 1.16.10). Stage refuses rather than
	// fall back to a plain switch.
	ErrDownloadOnlyUnsupported = errors.New("bootc on this host has no `switch --download-only` (bootc 1.16.10 or newer is needed), and staging without it would let any reboot boot the new image")
	// ErrStagedUnlocked means an image is staged but not download-only, so
	// any reboot, planned or not, would boot it.
	ErrStagedUnlocked = errors.New("the staged deployment is not download-only, so any reboot would boot it")
	// ErrNotStaged means the image to apply is not the staged deployment.
	ErrNotStaged = errors.New("the image is not the staged deployment")
	// ErrNoRollback means there is no rollback deployment to go back to.
	ErrNoRollback = errors.New("there is no rollback deployment")
)

// Client drives bootc through a Runner. Each method runs the commands its
// comment names, in that order, and nothing else.
type Client struct {
	Runner Runner

	// The last status output and what it parsed to: the daemon reads the
	// status far more often than the host changes, and an unchanged output
	// needs no second parse (in the twin, parsing was a tenth of a run).
	mu       sync.Mutex
	lastOut  []byte
	lastStat *Status
}

// statusArgs pins the output format: JSON, because its types are not at the
// mercy of YAML's implicit typing, and format version 1, so that a future
// bootc that changes the default schema keeps printing the one Parse knows.
var statusArgs = []string{"status", "--json", "--format-version", "1"}

// Status runs `bootc status --json --format-version 1` and parses it. The
// Status returned is shared with later calls that read the same output:
// callers must not modify it.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	out, err := c.run(ctx, "bootc", statusArgs...)
	if err != nil {
		return nil, fmt.Errorf("reading bootc status: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastStat != nil && bytes.Equal(out, c.lastOut) {
		return c.lastStat, nil
	}
	st, err := parseShared(out)
	if err != nil {
		return nil, fmt.Errorf("reading bootc status: output of %s: %w", commandLine("bootc", statusArgs), err)
	}
	c.lastOut, c.lastStat = bytes.Clone(out), st
	return st, nil
}

// parsed holds the parses of the last few distinct status outputs for
// every Client of the process: a node's daemon has one Client, but the
// twin and host mode run hundreds of daemons in one process, whose hosts
// pass through the same few states and print the same documents (parsing
// them was 3% of a twin rollout). Bounded: it is emptied when full.
var parsed struct {
	mu sync.Mutex
	m  map[string]*Status
}

// maxParsed bounds parsed.
const maxParsed = 64

// parseShared is Parse through parsed. The Status is shared: callers must
// not modify it.
func parseShared(out []byte) (*Status, error) {
	parsed.mu.Lock()
	st, ok := parsed.m[string(out)]
	parsed.mu.Unlock()
	if ok {
		return st, nil
	}
	st, err := Parse(out)
	if err != nil {
		return nil, err
	}
	parsed.mu.Lock()
	if parsed.m == nil || len(parsed.m) >= maxParsed {
		parsed.m = make(map[string]*Status, maxParsed)
	}
	parsed.m[string(out)] = st
	parsed.mu.Unlock()
	return st, nil
}

// Stage downloads image and stages it in download-only mode, so that no
// reboot boots it until Apply: it runs `bootc switch --download-only -- IMAGE`,
// then Status to check that image is staged and still download-only. An
// unplanned reboot discards a download-only deployment (the pulled layers
// stay cached), after which Stage must be called again.
//
// On a bootc without `switch --download-only` it returns an error wrapping
// ErrDownloadOnlyUnsupported and stages nothing. If bootc leaves the staged
// deployment unlocked (it does when the same image was already staged
// without --download-only) the error wraps ErrStagedUnlocked.
func (c *Client) Stage(ctx context.Context, image string) error {
	if image == "" {
		return errors.New("staging: no image given")
	}
	// "--" ends bootc's options (clap treats what follows as the TARGET
	// positional), so an image that starts with "-" cannot be read as a
	// flag such as --apply, which would reboot the host at once.
	if _, err := c.run(ctx, "bootc", "switch", "--download-only", "--", image); err != nil {
		if unexpectedFlag(err, "--download-only") {
			return fmt.Errorf("staging %s: %w: %w", image, ErrDownloadOnlyUnsupported, err)
		}
		return fmt.Errorf("staging %s: %w", image, err)
	}
	st, err := c.Status(ctx)
	if err != nil {
		return fmt.Errorf("staging %s: checking the staged deployment: %w", image, err)
	}
	switch {
	case st.Staged == nil && matches(st.Booted, image):
		return fmt.Errorf("staging %s: nothing was staged because it is already the booted image", image)
	case st.Staged == nil:
		return fmt.Errorf("staging %s: bootc switch succeeded but nothing is staged", image)
	case !matches(st.Staged, image):
		return fmt.Errorf("staging %s: bootc switch succeeded but the staged deployment is %s", image, describe(st.Staged))
	case !st.Staged.DownloadOnly:
		return fmt.Errorf("staging %s: %w", image, ErrStagedUnlocked)
	}
	return nil
}

// Apply boots the staged image: it runs Status to check that image is the
// staged deployment (ErrNotStaged if not, and nothing else is run), then
// `bootc switch --from-downloaded` when the deployment is download-only, to
// unlock it, and then `systemctl reboot`. If the reboot command fails the
// deployment stays unlocked, and calling Apply again only reboots.
func (c *Client) Apply(ctx context.Context, image string) error {
	st, err := c.Status(ctx)
	if err != nil {
		return fmt.Errorf("applying %s: %w", image, err)
	}
	if image == "" || !matches(st.Staged, image) {
		return fmt.Errorf("applying %s: %w (staged: %s)", image, ErrNotStaged, describe(st.Staged))
	}
	if st.Staged.DownloadOnly {
		if _, err := c.run(ctx, "bootc", "switch", "--from-downloaded"); err != nil {
			return fmt.Errorf("applying %s: unlocking the staged deployment: %w", image, err)
		}
	}
	if _, err := c.run(ctx, "systemctl", "reboot"); err != nil {
		return fmt.Errorf("applying %s: the staged deployment is unlocked but the reboot failed: %w", image, err)
	}
	return nil
}

// Rollback makes the rollback deployment the next boot, without rebooting:
// it runs Status and then `bootc rollback`, which also discards any staged
// deployment. It does nothing when a rollback is already queued, because
// running `bootc rollback` again would undo it; it returns ErrNoRollback
// when there is no rollback deployment. Call Reboot to boot it.
func (c *Client) Rollback(ctx context.Context) error {
	st, err := c.Status(ctx)
	if err != nil {
		return fmt.Errorf("rolling back: %w", err)
	}
	if st.RollbackQueued {
		return nil
	}
	if st.Rollback == nil {
		return fmt.Errorf("rolling back: %w", ErrNoRollback)
	}
	if _, err := c.run(ctx, "bootc", "rollback"); err != nil {
		return fmt.Errorf("rolling back to %s: %w", describe(st.Rollback), err)
	}
	return nil
}

// Reboot runs `systemctl reboot`, which queues the reboot and returns.
func (c *Client) Reboot(ctx context.Context) error {
	if _, err := c.run(ctx, "systemctl", "reboot"); err != nil {
		return fmt.Errorf("rebooting: %w", err)
	}
	return nil
}

// ShuttingDown runs `systemctl is-system-running` and reports whether the
// host is going down: systemd says "stopping" once a reboot or power-off
// has begun. The command exits non-zero in every state but "running"; the
// state it prints is what counts, and only a command that prints none
// fails.
func (c *Client) ShuttingDown(ctx context.Context) (bool, error) {
	out, err := c.run(ctx, "systemctl", "is-system-running")
	state := strings.TrimSpace(string(out))
	if state == "" || strings.ContainsAny(state, " \t\n") {
		if err == nil {
			err = fmt.Errorf("systemctl is-system-running: printed %q, want one systemd state", state)
		}
		return false, err
	}
	return state == "stopping", nil
}

// run runs one command and names it in the error.
func (c *Client) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	if c.Runner == nil {
		return nil, fmt.Errorf("%s: bootc.Client has no Runner", commandLine(name, args))
	}
	out, err := c.Runner.Run(ctx, name, args...)
	if err != nil {
		return out, fmt.Errorf("%s: %w", commandLine(name, args), err)
	}
	return out, nil
}

// matches reports whether d is a deployment of image: the same reference,
// or, for a digest reference, the same digest.
func matches(d *Deployment, image string) bool {
	if d == nil || image == "" {
		return false
	}
	if d.Image == image {
		return true
	}
	return d.Digest != "" && imageref.Digest(image) == d.Digest
}

func describe(d *Deployment) string {
	switch {
	case d == nil:
		return "none"
	case d.Image == "":
		return "an ostree deployment with no image"
	}
	return d.Image + " (" + d.Digest + ")"
}

// unexpectedFlag reports whether err is a bootc usage error for flag, as
// clap words it in bootc releases that do not know the flag.
func unexpectedFlag(err error, flag string) bool {
	msg := err.Error()
	return strings.Contains(msg, "unexpected argument '"+flag+"'") ||
		strings.Contains(msg, "Found argument '"+flag+"'")
}

func commandLine(name string, args []string) string {
	parts := make([]string, 0, 1+len(args))
	for _, a := range append([]string{name}, args...) {
		if a == "" || strings.ContainsAny(a, " \t\n\"'") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}
