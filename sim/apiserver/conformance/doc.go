// Package conformance holds a test, and nothing else, that runs the same
// client operations against the twin's API server (sim/apiserver) and a
// real kube-apiserver with etcd (controller-runtime's envtest), and requires
// the same results and errors. docs/fidelity.md, section "API server
// conformance", lists the differences it found and what became of each.
package conformance
