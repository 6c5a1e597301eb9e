// Package rollout holds bootroll's rollout rules as pure functions: given
// a pool's spec and status, its rows (each node's record and Node as
// plain data) and the time, what to halt, which nodes to direct to the
// target, which slots stay held and in what order free slots go, and what
// the status says. It reads no API, keeps no state and never looks at a
// clock: the reconcilers in package controller read the world, call these
// functions and write what they decide.
//
// The rules are tested by tables (*_test.go) and by transcripts
// (testdata/*.txt: a world described line by line, a pass, and the
// decisions the pass made; `go test ./controller/rollout -update`
// rewrites the expected decisions).
package rollout
