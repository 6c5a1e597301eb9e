package engine

import (
	"time"

	"k8s.io/utils/clock"
)

// timersUnsupported is the panic message of every Clock method that would
// need a timer: logic must return RequeueAfter instead of waiting.
const timersUnsupported = "sim clock: timers are not supported; return RequeueAfter"

// Clock is the engine's virtual clock as a k8s.io/utils/clock.Clock. Now and
// Since read virtual time. The timer methods panic: logic must not wait on a
// clock (DESIGN.md section 1), and a single-threaded run would block forever
// on a timer channel anyway.
type Clock struct {
	e *Engine
}

var _ clock.WithTickerAndDelayedExecution = (*Clock)(nil)

// Now returns the engine's virtual time.
func (c *Clock) Now() time.Time { return c.e.Now() }

// Since returns the virtual time elapsed since t.
func (c *Clock) Since(t time.Time) time.Duration { return c.e.Now().Sub(t) }

// After panics: timers are not supported.
func (c *Clock) After(time.Duration) <-chan time.Time { panic(timersUnsupported) }

// NewTimer panics: timers are not supported.
func (c *Clock) NewTimer(time.Duration) clock.Timer { panic(timersUnsupported) }

// Sleep panics: timers are not supported.
func (c *Clock) Sleep(time.Duration) { panic(timersUnsupported) }

// Tick panics: timers are not supported.
func (c *Clock) Tick(time.Duration) <-chan time.Time { panic(timersUnsupported) }

// NewTicker panics: timers are not supported.
func (c *Clock) NewTicker(time.Duration) clock.Ticker { panic(timersUnsupported) }

// AfterFunc panics: timers are not supported; schedule engine events instead.
func (c *Clock) AfterFunc(time.Duration, func()) clock.Timer { panic(timersUnsupported) }
