package bootc

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits on what ExecRunner keeps from a command.
const (
	// MaxStdout bounds the stdout ExecRunner returns; more is an error.
	MaxStdout = 16 << 20
	// MaxStderr bounds the stderr quoted in a CommandError. The end is kept
	// because bootc prints its error chain last.
	MaxStderr = 1024
	// waitDelay bounds how long Run waits for the output pipes after the
	// context ends the command, in case a child still holds them.
	waitDelay = 10 * time.Second
)

// ExecRunner is the real Runner: it runs commands with os/exec in the mount
// and PID namespaces of the calling process. A daemon in a pod wraps the
// command (for example in nsenter) so that bootc sees the host.
type ExecRunner struct{}

// CommandError reports a command that could not start or exited non-zero.
type CommandError struct {
	Err    error  // from os/exec, e.g. *exec.ExitError
	Stderr string // the end of stderr, trimmed, newlines as "; ", at most MaxStderr bytes
}

func (e *CommandError) Error() string {
	if e.Stderr == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + ": " + e.Stderr
}

func (e *CommandError) Unwrap() error { return e.Err }

// Run runs name with args and returns its stdout. A failure is a
// *CommandError carrying the end of stderr.
func (ExecRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return run(exec.CommandContext(ctx, name, args...), func(err error) error { return err }) // edge: runs host commands
}

// run runs cmd with its stdout bounded (MaxStdout) and the end of its
// stderr kept, and returns its stdout; wrap names a failure.
func run(cmd *exec.Cmd, wrap func(error) error) ([]byte, error) {
	stdout := &capBuffer{max: MaxStdout}
	stderr := &tailBuffer{max: 4 * MaxStderr}
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.WaitDelay = waitDelay
	if err := cmd.Run(); err != nil {
		return stdout.buf, &CommandError{Err: wrap(err), Stderr: boundStderr(stderr.buf)}
	}
	if stdout.over {
		return nil, &CommandError{Err: errStdoutTooLong, Stderr: boundStderr(stderr.buf)}
	}
	return stdout.buf, nil
}

var errStdoutTooLong = fmt.Errorf("stdout is longer than %d bytes", MaxStdout)

// boundStderr trims stderr, joins its lines with "; " and keeps at most the
// last MaxStderr bytes, cut at a character boundary.
func boundStderr(b []byte) string {
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	s := strings.Join(lines, "; ")
	if len(s) <= MaxStderr {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	const ellipsis = "…"
	cut := len(s) - (MaxStderr - len(ellipsis))
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return ellipsis + strings.ToValidUTF8(s[cut:], "\uFFFD")
}

// capBuffer keeps the first max bytes and notes whether there were more.
// It never fails a write, so the command is not killed by a broken pipe.
type capBuffer struct {
	buf  []byte
	max  int
	over bool
}

func (b *capBuffer) Write(p []byte) (int, error) {
	room := b.max - len(b.buf)
	if len(p) > room {
		b.over = true
		b.buf = append(b.buf, p[:max(room, 0)]...)
		return len(p), nil
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if extra := len(b.buf) - b.max; extra > 0 {
		b.buf = append(b.buf[:0], b.buf[extra:]...)
	}
	return len(p), nil
}
