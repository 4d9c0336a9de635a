// Command eva-operator runs the EvaTenant controller manager.
//
// Until the reconciler lands it starts the manager with leader election, serves the
// health and readiness probes and /metrics, and registers the EvaTenant API.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/tenant"
)

// config is everything the operator reads at start-up, once.
type config struct {
	metricsAddr     string
	probeAddr       string
	leaderElect     bool
	catalogPath     string
	operatorVersion string
}

func main() {
	var cfg config
	flag.StringVar(&cfg.metricsAddr, "metrics-bind-address", ":8080", "address the /metrics endpoint binds to")
	flag.StringVar(&cfg.probeAddr, "health-probe-bind-address", ":8081", "address the health probes bind to")
	flag.BoolVar(&cfg.leaderElect, "leader-elect", false, "elect a leader so only one replica reconciles")
	flag.StringVar(&cfg.catalogPath, "catalog", "", "catalog YAML file replacing the built-in tiers and modules")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	cfg.operatorVersion = os.Getenv("OPERATOR_VERSION")

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(cfg); err != nil {
		ctrl.Log.Error(err, "operator stopped")
		os.Exit(1)
	}
}

func run(cfg config) error {
	log := ctrl.Log.WithName("setup")
	if _, err := tenant.LoadCatalog(cfg.catalogPath); err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(evav1.AddToScheme(scheme))

	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: cfg.metricsAddr},
		HealthProbeBindAddress: cfg.probeAddr,
		LeaderElection:         cfg.leaderElect,
		LeaderElectionID:       "eva-operator.eva.aidonow.com",
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}
	log.Info("starting manager", "operatorVersion", cfg.operatorVersion, "leaderElection", cfg.leaderElect)
	return mgr.Start(ctrl.SetupSignalHandler())
}
