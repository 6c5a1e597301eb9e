package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/bootroll/bootroll/api/v1alpha1"
	ctrlopts "github.com/bootroll/bootroll/controller/options"
	"github.com/bootroll/bootroll/controller/resolve"
	"github.com/bootroll/bootroll/controller/rollout"
)

// RunConfig is what the controller process is started with: the flags of
// bootroll-controller (and of the bootroll_testonly build's
// testonly-controller, which also sets TestOnly).
type RunConfig struct {
	MetricsAddr, ProbeAddr string
	LeaderElect            bool
	// Namespace holds the pools' imagePullSecrets and the leader lease.
	Namespace        string
	InsecureRegistry bool
	// TestOnly is zero in every shipped binary.
	TestOnly rollout.TestOnly
	// StartMessage and StartValues are the "setup" log line at start.
	StartMessage string
	StartValues  []any
}

// Run builds the manager of the controller process (scheme, trimmed
// caches, uncached Secrets, metrics, probes, leader election), sets up
// every controller on it and runs it until a signal stops it.
func Run(cfg *rest.Config, c RunConfig) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		// Pods and Nodes are cached trimmed to what the controller reads,
		// and no object keeps its managedFields (docs/scale.md).
		Cache: ctrlopts.CacheOptions(),
		// Pull secrets are read one at a time from the API server: a
		// cache would watch every Secret in the cluster.
		Client:                  client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Metrics:                 metricsserver.Options{BindAddress: c.MetricsAddr},
		HealthProbeBindAddress:  c.ProbeAddr,
		LeaderElection:          c.LeaderElect,
		LeaderElectionID:        "bootroll-controller.bootroll.dev",
		LeaderElectionNamespace: c.Namespace,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	err = Setup(mgr, ctrlopts.Options{
		Clock:           clock.RealClock{}, // edge: production time
		Resolver:        &resolve.Registry{Insecure: c.InsecureRegistry},
		Recorder:        mgr.GetEventRecorderFor("bootroll-controller"), //nolint:staticcheck // the core/v1 Events API is what kubectl describe shows
		Metrics:         ctrlopts.NewMetrics(metrics.Registry),
		SecretNamespace: c.Namespace,
		TestOnly:        c.TestOnly,
	})
	if err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info(c.StartMessage, c.StartValues...)
	return mgr.Start(ctrl.SetupSignalHandler())
}
