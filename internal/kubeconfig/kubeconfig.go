// Package kubeconfig loads the REST config of bootroll's controller and
// daemons, the same way whether the kubeconfig is named on the command
// line or found by controller-runtime.
package kubeconfig

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Load returns the REST config of the kubeconfig at path, or, when path
// is empty, controller-runtime's (--kubeconfig, $KUBECONFIG, in-cluster,
// ~/.kube/config). Either way client-side rate limiting is off, as
// controller-runtime leaves it for the configs it loads (QPS -1: the API
// server's priority and fairness limits the client): a config built from
// a named file otherwise got client-go's default of 5 requests per second
// (burst 10), and a controller started with --kubeconfig gave back the
// nodes of a deleted 100-node pool at that pace, well past the cleanup
// bound the twin holds it to, where the same controller in a pod did not.
func Load(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := ctrl.GetConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig, and no $KUBECONFIG, in-cluster config or ~/.kube/config: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("load --kubeconfig %s: %w", path, err)
	}
	if cfg.QPS == 0 {
		cfg.QPS = -1
	}
	return cfg, nil
}
