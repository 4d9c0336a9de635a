// Package testcluster starts a real Kubernetes control plane in one process tree for
// end-to-end tests: kube-apiserver and etcd (through envtest), kube-controller-manager
// (namespace deletion, deployments and replica sets, jobs, garbage collection, quota,
// ClusterRole aggregation), kube-scheduler and kwok, which plays the kubelet of fake
// nodes so pods are scheduled, become Running and Ready, and Job pods Succeed, after a
// configurable delay. Every port is on 127.0.0.1. Every process runs in its own process
// group and is killed with SIGKILL when the cluster stops, or when the test process dies.
//
// The binaries are built from the Go module proxy by hack/envtest-binaries.sh and
// hack/e2e-binaries.sh, at the versions in hack/versions.txt.
package testcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/aidonow/eva/internal/testenv"
)

// Options shape a cluster.
type Options struct {
	// CRDDirs are installed when the API server starts.
	CRDDirs []string
	// Nodes is the number of fake nodes (default 1).
	Nodes int
	// PodStartDelay is how long kwok takes to make a scheduled pod Running and Ready,
	// and a Job's running pod Succeeded.
	PodStartDelay time.Duration
}

// Cluster is a running control plane.
type Cluster struct {
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Client is an uncached administrator client.
	Client client.Client
	// KubeConfig is the path of an administrator kubeconfig file.
	KubeConfig string
	// Dir holds the cluster's files (kubeconfig, kwok's stages, controller state).
	Dir string
	// MessagingURL is the client URL of the cluster's JetStream server, once
	// StartMessaging started it.
	MessagingURL string
	// AccountsNATS is the cluster's NATS server in operator mode with a full resolver,
	// once StartMessaging started it: the server of the tenants' own accounts (an
	// environment with natsAccounts), which the NACK stand-in reaches with the
	// credentials a Stream's NACK Account names.
	AccountsNATS *testenv.OperatorNATS

	env *envtest.Environment
	// stopEnv stops the API server and etcd (testenv.StartEnvironment).
	stopEnv func() error
	// mu guards procs: components start and stop while scenarios run (Argo CD).
	mu    sync.Mutex
	procs []*testenv.Process
}

// Start starts the API server, etcd, kube-controller-manager, kube-scheduler and kwok
// with the fake nodes, and waits until the nodes are Ready.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	if opts.Nodes == 0 {
		opts.Nodes = 1
	}
	bins, err := Binaries()
	if err != nil {
		return nil, err
	}
	if err := built(bins.ControllerManager, bins.Scheduler, bins.Kwok); err != nil {
		return nil, err
	}
	assets, err := testenv.AssetsDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "eva-cluster-")
	if err != nil {
		return nil, err
	}
	c = &Cluster{Dir: dir}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	c.env = &envtest.Environment{
		CRDDirectoryPaths:     opts.CRDDirs,
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	if c.Config, c.stopEnv, err = testenv.StartEnvironment(c.env); err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	if c.Client, err = client.New(c.Config, client.Options{Scheme: scheme.Scheme}); err != nil {
		return nil, err
	}
	c.KubeConfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(c.KubeConfig, c.env.KubeConfig, 0o600); err != nil {
		return nil, err
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, c.Config.CAData, 0o600); err != nil {
		return nil, err
	}
	certDir := c.env.ControlPlane.APIServer.CertDir

	kubeconfig := "--kubeconfig=" + c.KubeConfig
	if err := c.start("kube-controller-manager", bins.ControllerManager,
		kubeconfig, "--authentication-kubeconfig="+c.KubeConfig, "--authorization-kubeconfig="+c.KubeConfig,
		"--leader-elect=false", "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", freePort()),
		"--service-account-private-key-file="+filepath.Join(certDir, "sa-signer.key"), "--root-ca-file="+caFile,
		// No cloud or IPAM controllers. The node lifecycle controller stays: it lifts the
		// not-ready taint the API server puts on a new node once kwok reports it Ready,
		// and kwok keeps its lease renewed.
		"--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller",
		"--concurrent-gc-syncs=5", "--concurrent-namespace-syncs=5",
	); err != nil {
		return nil, err
	}
	if err := c.start("kube-scheduler", bins.Scheduler,
		kubeconfig, "--authentication-kubeconfig="+c.KubeConfig, "--authorization-kubeconfig="+c.KubeConfig,
		"--leader-elect=false", "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", freePort()),
	); err != nil {
		return nil, err
	}
	stages := filepath.Join(dir, "kwok-stages.yaml")
	if err := os.WriteFile(stages, []byte(kwokStages(opts.PodStartDelay)), 0o600); err != nil {
		return nil, err
	}
	if err := c.start("kwok", bins.Kwok, kubeconfig, "--config="+stages,
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr=10.244.0.0/16", "--node-ip=10.0.0.1", "--node-lease-duration-seconds=40",
		fmt.Sprintf("--server-address=127.0.0.1:%d", freePort()),
	); err != nil {
		return nil, err
	}
	for i := range opts.Nodes {
		if err := c.Client.Create(ctx, fakeNode(fmt.Sprintf("kwok-node-%d", i))); err != nil {
			return nil, fmt.Errorf("creating a fake node: %w", err)
		}
	}
	if err := c.waitNodesReady(ctx, opts.Nodes); err != nil {
		return nil, err
	}
	return c, nil
}

// fakeNode is a node kwok manages (its annotation) and plays the kubelet of.
func fakeNode(name string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("1000"), corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels:      map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok"}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

func (c *Cluster) waitNodesReady(ctx context.Context, n int) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var nodes corev1.NodeList
		if err := c.Client.List(ctx, &nodes); err == nil {
			ready := 0
			for _, node := range nodes.Items {
				for _, cond := range node.Status.Conditions {
					if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
			if ready >= n {
				return nil
			}
		}
		if err := c.Check(); err != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("fake nodes not Ready within 60s; kwok said:\n%s", c.proc("kwok").Tail(2000))
}

// start runs one component and checks it did not exit at once (a bad flag).
func (c *Cluster) start(name, bin string, args ...string) error {
	return c.startWith(name, bin, []string{"KUBECONFIG=" + c.KubeConfig}, args...)
}

// startWith starts a component with its own environment variables (besides the test
// process's).
func (c *Cluster) startWith(name, bin string, env []string, args ...string) error {
	p, err := testenv.StartProcess(name, bin, c.Dir, append(testenv.ControlPlaneEnv(), env...), args...)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	time.Sleep(300 * time.Millisecond)
	if p.Exited() {
		return fmt.Errorf("%s exited at start:\n%s", name, p.Tail(3000))
	}
	return nil
}

// settle gives components just started a moment to fail on a bad flag or a missing CRD;
// if one did, it stops them (stop) and says which.
func (c *Cluster) settle(stop func()) error {
	time.Sleep(2 * time.Second)
	if err := c.Check(); err != nil {
		stop()
		return err
	}
	return nil
}

// Check returns an error naming every component that is no longer running.
func (c *Cluster) Check() error {
	var errs []error
	for _, p := range c.processes() {
		if p.Exited() {
			errs = append(errs, fmt.Errorf("%s exited:\n%s", p.Name, p.Tail(3000)))
		}
	}
	return errors.Join(errs...)
}

func (c *Cluster) processes() []*testenv.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.procs)
}

func (c *Cluster) proc(name string) *testenv.Process {
	for _, p := range c.processes() {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// stopProcesses kills the named components and forgets them: Check no longer expects
// them to run.
func (c *Cluster) stopProcesses(names ...string) {
	c.mu.Lock()
	var stopped []*testenv.Process
	c.procs = slices.DeleteFunc(c.procs, func(p *testenv.Process) bool {
		if slices.Contains(names, p.Name) {
			stopped = append(stopped, p)
			return true
		}
		return false
	})
	c.mu.Unlock()
	for _, p := range stopped {
		p.Kill()
	}
	saveLogs(stopped)
}

// saveLogs keeps the output of stopped components in the folder EVA_CLUSTER_LOGS names,
// if any, for looking into a failure.
func saveLogs(procs []*testenv.Process) {
	dir := os.Getenv("EVA_CLUSTER_LOGS")
	if dir == "" {
		return
	}
	_ = os.MkdirAll(dir, 0o755)
	for _, p := range procs {
		_ = os.WriteFile(filepath.Join(dir, p.Name+".log"), []byte(p.Output()), 0o644)
	}
}

// Logs returns the last n bytes of a component's output.
func (c *Cluster) Logs(name string, n int) string {
	if p := c.proc(name); p != nil {
		return p.Tail(n)
	}
	return ""
}

// Output returns everything a component has printed so far (empty when there is no
// such component).
func (c *Cluster) Output(name string) string {
	if p := c.proc(name); p != nil {
		return p.Output()
	}
	return ""
}

// Stop kills every component (SIGKILL), stops the API server and etcd and removes the
// cluster's files.
func (c *Cluster) Stop() {
	procs := c.processes()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Kill()
	}
	saveLogs(procs)
	if c.stopEnv != nil {
		_ = c.stopEnv()
	}
	_ = os.RemoveAll(c.Dir)
}

// KubeConfigAs writes a kubeconfig that impersonates user and returns its path.
func (c *Cluster) KubeConfigAs(user string, groups ...string) (string, error) {
	cfg, err := clientcmd.Load(c.env.KubeConfig)
	if err != nil {
		return "", err
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate, auth.ImpersonateGroups = user, groups
	}
	path := filepath.Join(c.Dir, "kubeconfig-"+strings.NewReplacer(":", "-", "/", "-").Replace(user))
	// Written aside and renamed into place: tests in parallel ask for the same user's
	// file while another's operator is reading it, and a file rewritten in place was
	// read empty ("no configuration has been provided") by an operator starting then.
	tmp, err := os.CreateTemp(c.Dir, ".kubeconfig-*")
	if err != nil {
		return "", err
	}
	_ = tmp.Close()
	if err := clientcmd.WriteToFile(*cfg, tmp.Name()); err != nil {
		return "", err
	}
	return path, os.Rename(tmp.Name(), path)
}

// Components are the paths of the cluster's components.
type Components struct {
	ControllerManager, Scheduler, Kwok                    string
	SourceController, KustomizeController, HelmController string
	// Sops is the sops CLI as kustomize-controller links it: tests encrypt tenant
	// Secrets with it, as users do.
	Sops string
	// ArgoCD is Argo CD's one binary (ARGOCD_BINARY_NAME picks the component); Helm is
	// the helm CLI its repo server runs, at the Helm version Eva's go.mod requires.
	ArgoCD, Helm string
}

// Binaries finds the components built by hack/e2e-binaries.sh.
func Binaries() (Components, error) {
	versions, err := Versions()
	if err != nil {
		return Components{}, err
	}
	dir := filepath.Join(testenv.RepoRoot(), "bin", "e2e")
	path := func(name, version string) string { return filepath.Join(dir, name+"-"+version) }
	b := Components{
		ControllerManager:   path("kube-controller-manager", versions["kubernetes"]),
		Scheduler:           path("kube-scheduler", versions["kubernetes"]),
		Kwok:                path("kwok", "v"+versions["kwok"]),
		SourceController:    path("source-controller", "v"+versions["source-controller"]),
		KustomizeController: path("kustomize-controller", "v"+versions["kustomize-controller"]),
		HelmController:      path("helm-controller", "v"+versions["helm-controller"]),
		Sops:                path("sops", "v"+versions["kustomize-controller"]),
		ArgoCD:              path("argocd", "v"+versions["argo-cd"]),
	}
	helm, err := requiredVersion("helm.sh/helm/v3")
	if err != nil {
		return Components{}, err
	}
	b.Helm = path("helm", helm)
	return b, nil
}

// requiredVersion reads the version of a module Eva's go.mod requires.
func requiredVersion(module string) (string, error) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == module {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("go.mod requires no %s", module)
}

// built checks that every path exists.
func built(paths ...string) error {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s is not built: run 'make e2e-binaries' (hack/e2e-binaries.sh)", p)
		}
	}
	return nil
}

// freePort returns a free TCP port on 127.0.0.1 for a component to bind
// (testenv.Port; 0 when none could be had: the component then fails to start and
// says so).
func freePort() int {
	port, err := testenv.Port()
	if err != nil {
		return 0
	}
	return port
}

// Versions reads hack/versions.txt: component name → version.
func Versions() (map[string]string, error) {
	f, err := os.Open(filepath.Join(testenv.RepoRoot(), "hack", "versions.txt"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if name, version, ok := strings.Cut(line, " "); ok {
			out[name] = strings.TrimSpace(version)
		}
	}
	return out, sc.Err()
}

// CPU returns the CPU time used so far by the running components whose names start
// with prefix ("helm-controller" counts every shard's too).
func (c *Cluster) CPU(prefix string) (time.Duration, error) {
	var total time.Duration
	for _, p := range c.processes() {
		if strings.HasPrefix(p.Name, prefix) {
			cpu, err := p.CPUTime()
			if err != nil {
				return 0, err
			}
			total += cpu
		}
	}
	return total, nil
}
