// Package readopts holds the option lists of reads that take the object
// as the cache holds it, shared by the controller and the node daemon.
package readopts

import "sigs.k8s.io/controller-runtime/pkg/client"

// NoCopyGet and NoCopyList read without a deep copy
// (client.UnsafeDisableDeepCopy), as the option lists of the hot reads:
// passed as opts..., they spare the one-element slice a variadic call
// allocates for each read. No client changes the options it is given;
// nor may a caller change these.
var (
	NoCopyGet  = []client.GetOption{client.UnsafeDisableDeepCopy}
	NoCopyList = []client.ListOption{client.UnsafeDisableDeepCopy}
)
