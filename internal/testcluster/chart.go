package testcluster

import (
	"context"
	"fmt"
	"path/filepath"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/aidonow/eva/internal/testenv"
)

// OperatorNamespace is where the operator's chart is installed.
const OperatorNamespace = "eva-system"

// InstallOperatorChart installs deploy/charts/eva-operator with Helm, as a user does,
// into OperatorNamespace (created unless it exists) of the cluster kubeconfig reaches,
// with values and no replica: the operator's image cannot run on this machine, so the
// operator runs as a process beside the cluster.
func InstallOperatorChart(ctx context.Context, kubeconfig string, values map[string]any) error {
	ns := OperatorNamespace
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, ns, "secret", func(string, ...any) {}); err != nil {
		return err
	}
	chrt, err := loader.Load(filepath.Join(testenv.RepoRoot(), "deploy", "charts", "eva-operator"))
	if err != nil {
		return err
	}
	withReplicas := map[string]any{"replicas": 0}
	for k, v := range values {
		withReplicas[k] = v
	}
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace = "eva-operator", ns, true
	if _, err := install.RunWithContext(ctx, chrt, withReplicas); err != nil {
		return fmt.Errorf("helm install of deploy/charts/eva-operator: %w", err)
	}
	return nil
}
