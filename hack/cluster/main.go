// Command cluster is `make cluster`: a cluster to try Eva on, on one machine, with no
// container engine. It starts the test suite's control plane (kube-apiserver and etcd,
// kube-controller-manager, kube-scheduler, kwok's fake nodes), the real Flux controllers
// in lockdown mode, an OCI registry on loopback holding the module charts, and a
// JetStream server; installs the operator's chart with Helm as docs/install.md says (its
// values from `evactl operator values`), with no replica; and runs the operator binary
// beside the cluster as the chart's service account, because no container runtime
// exists here to run its image. Two named stand-ins play what no real component can do
// here: NACK (streams created in the JetStream server) and the ingress controller (a
// load-balancer address on each Ingress). It prints the kubeconfig and stays up until
// interrupted.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/aidonow/eva/internal/chartrepo"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/testcluster"
	"github.com/aidonow/eva/internal/testenv"
)

// operatorNamespace is where the chart is installed and the EvaTenants live.
const operatorNamespace = testcluster.OperatorNamespace

func main() {
	dir := flag.String("dir", "out/cluster", "folder for the kubeconfig, the environment and the operator's log")
	env := flag.String("env", "dev", "the environment of Eva's overlays/ the operator renders with")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *dir, *env); err != nil {
		fmt.Fprintln(os.Stderr, "make cluster:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir, envName string) error {
	root := testenv.RepoRoot()
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	say("starting kube-apiserver, etcd, kube-controller-manager, kube-scheduler and kwok")
	cluster, err := testcluster.Start(ctx, testcluster.Options{
		CRDDirs:       []string{filepath.Join(root, "base", "crd", "bases"), filepath.Join(root, "internal", "testenv", "crds", "addons")},
		Nodes:         2,
		PodStartDelay: 2 * time.Second,
	})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	say("starting Flux's source-, kustomize- and helm-controller")
	if err := cluster.StartFlux(ctx); err != nil {
		return err
	}
	registry, err := testcluster.OCIRegistry()
	if err != nil {
		return err
	}
	defer registry.Close()
	overlays, err := publishCharts(root, dir, envName, "oci://"+registry.Host()+"/eva/charts")
	if err != nil {
		return err
	}
	say("installing the operator's chart with evactl operator values --env " + envName)
	if err := installChart(ctx, cluster, dir, overlays, envName); err != nil {
		return err
	}
	_, stopMessaging, err := cluster.StartMessaging(ctx)
	if err != nil {
		return err
	}
	defer stopMessaging()
	operator, err := startOperator(cluster, root, overlays, envName)
	if err != nil {
		return err
	}
	defer operator.Kill()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	data, err := os.ReadFile(cluster.KubeConfig)
	if err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		return err
	}
	fmt.Printf(`
The cluster is up (kwok's nodes: pods are simulated, no container runs). The operator
runs beside it as a process (%s/operator.log), in pure-cluster mode, environment %s.

  export KUBECONFIG=%s
  kubectl apply -f tenants/DEVUSR.yaml
  kubectl wait --for=condition=Ready evatenant/devusr -n eva-system --timeout=5m
  kubectl get evatenants -n eva-system

Stand-ins (no real component runs here): NACK, which creates each Stream in the
embedded JetStream server; the ingress controller, which gives each Ingress an address.
Interrupt (Ctrl-C) to stop it; nothing is left running.
`, dir, envName, kubeconfig)
	<-ctx.Done()
	say("stopping")
	return os.WriteFile(filepath.Join(dir, "operator.log"), []byte(operator.Output()), 0o644)
}

// publishCharts pushes a copy of the module charts to the registry with evactl charts
// push, as a platform team does, and writes a copy of Eva's overlays whose environment
// takes the charts from there: a source in each tenant's namespace (Flux runs in
// lockdown, where a shared source in flux-system is refused).
func publishCharts(root, dir, envName, url string) (string, error) {
	evactl, err := testenv.Binary("./cmd/evactl", "evactl")
	if err != nil {
		return "", err
	}
	charts := filepath.Join(dir, "charts")
	if err := os.CopyFS(charts, os.DirFS(filepath.Join(root, "charts"))); err != nil {
		return "", err
	}
	_ = os.Remove(filepath.Join(charts, chartrepo.LockFile))
	if out, err := exec.Command(evactl, "charts", "push", "--charts", charts, "--to", url, "--insecure").CombinedOutput(); err != nil {
		return "", fmt.Errorf("evactl charts push: %v\n%s", err, out)
	}
	overlays := filepath.Join(dir, "overlays")
	if err := os.CopyFS(overlays, os.DirFS(filepath.Join(root, "overlays"))); err != nil {
		return "", err
	}
	settings := filepath.Join(overlays, envName, "tenant", overlay.SettingsFile)
	data, err := os.ReadFile(settings)
	if err != nil {
		return "", fmt.Errorf("environment %s: %w", envName, err)
	}
	m := map[string]any{}
	if err := yaml.Unmarshal(data, &m); err != nil {
		return "", err
	}
	m["chartSource"] = map[string]any{"kind": "HelmRepository", "name": "eva-charts", "url": url, "insecure": true}
	if data, err = yaml.Marshal(m); err != nil {
		return "", err
	}
	return overlays, os.WriteFile(settings, data, 0o644)
}

// installChart installs deploy/charts/eva-operator into eva-system (created and labelled
// as docs/install.md says) with the values evactl operator values prints, and no
// replica: the operator's image cannot run here.
func installChart(ctx context.Context, cluster *testcluster.Cluster, dir, overlays, envName string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}
	if err := cluster.Client.Create(ctx, ns); err != nil {
		return err
	}
	evactl, err := testenv.Binary("./cmd/evactl", "evactl")
	if err != nil {
		return err
	}
	cmd := exec.Command(evactl, "operator", "values", "--env", envName, "--overlays", overlays)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("evactl operator values: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "operator-values.yaml"), out, 0o644); err != nil {
		return err
	}
	values := map[string]any{}
	if err := yaml.Unmarshal(out, &values); err != nil {
		return fmt.Errorf("evactl operator values: %w", err)
	}
	return testcluster.InstallOperatorChart(ctx, cluster.KubeConfig, values)
}

// startOperator runs the operator binary as the chart's service account, with the
// environment the chart was installed with.
func startOperator(cluster *testcluster.Cluster, root, overlays, envName string) (*testenv.Process, error) {
	bin, err := testenv.Binary("./cmd/eva-operator", "eva-operator")
	if err != nil {
		return nil, err
	}
	kubeconfig, err := cluster.KubeConfigAs(testenv.OperatorServiceAccount,
		"system:serviceaccounts", "system:serviceaccounts:"+operatorNamespace, "system:authenticated")
	if err != nil {
		return nil, err
	}
	return testenv.StartProcess("eva-operator", bin, root,
		[]string{"KUBECONFIG=" + kubeconfig, "OPERATOR_VERSION=0.1.0", "POD_NAMESPACE=" + operatorNamespace},
		"--overlays="+overlays, "--env="+envName, "--metrics-bind-address=0", "--health-probe-bind-address=0")
}

func say(what string) { fmt.Fprintln(os.Stderr, "make cluster:", what) }
