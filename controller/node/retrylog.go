package node

import (
	"sync"
	"time"
)

// RetryLogEvery is how often a node's deadline retries (retryBeforeDeadline,
// every ConflictRetry) log the same error again while it lasts: the first
// failure is logged at once, a new error at once, the same one again once
// this long has passed, with the count of the tries not logged meanwhile.
// A Forbidden or an invalid patch does not go away by itself, and retried
// every second on each of a pool's holders it filled the log with one
// line per node per second; the metric
// bootroll_node_deadline_retries_total still counts every try.
const RetryLogEvery = time.Minute

// retryLog is the node reconciler's memory of what it last logged for
// each node's deadline retries. Its workers share it.
type retryLog struct {
	mu   sync.Mutex
	last map[retryKey]retryLogged
}

type retryKey struct{ node, owed string }

type retryLogged struct {
	at      time.Time
	msg     string
	skipped int
}

// note records a failed try of node's owed deadline with error message
// msg at now, and reports whether to log it and how many tries since the
// last logged one were not.
func (l *retryLog) note(node, owed, msg string, now time.Time) (log bool, skipped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[retryKey]retryLogged{}
	}
	k := retryKey{node, owed}
	prev, ok := l.last[k]
	if ok && prev.msg == msg && now.Sub(prev.at) < RetryLogEvery {
		prev.skipped++
		l.last[k] = prev
		return false, 0
	}
	l.last[k] = retryLogged{at: now, msg: msg}
	return true, prev.skipped
}
