package testcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/alicebob/miniredis/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/aidonow/eva/internal/testenv"
)

// ArgoCDNamespace is where Argo CD runs and the Applications and AppProjects live, as
// in an Argo CD installation.
const ArgoCDNamespace = "argocd"

// ArgoCDResync is how often the suite's application controller compares every
// Application with its source again (Argo CD's default is 3 minutes; a git push
// webhook usually makes it sooner, and the suite has none).
const ArgoCDResync = 5 * time.Second

// StartArgoCD installs Argo CD's CRDs (the ones the render tests check against) and
// starts the real Argo CD repo server and application controller (hack/e2e-binaries.sh
// builds them), reaching each other over plain gRPC on loopback, with sync
// impersonation enabled: every project must name the account its syncs run as.
// Argo CD's cache is a Redis server; the suite runs miniredis, a Redis implementation,
// in the test process (the one component here that is not what production runs: Redis
// is Argo CD's cache only, it holds no state of record). The returned function stops
// the controllers and Redis (Stop stops the controllers too); StartArgoCD may then be
// called again.
func (c *Cluster) StartArgoCD(ctx context.Context) (stop func(), err error) {
	bins, err := Binaries()
	if err != nil {
		return nil, err
	}
	if err := built(bins.ArgoCD, bins.Helm); err != nil {
		return nil, err
	}
	crds := filepath.Join(testenv.RepoRoot(), "internal", "testenv", "crds", "argocd")
	if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true}); err != nil {
		return nil, fmt.Errorf("installing Argo CD's CRDs: %w", err)
	}
	partOf := map[string]string{"app.kubernetes.io/part-of": "argocd"}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ArgoCDNamespace}},
		// Argo CD's settings, as its install manifests create them.
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "argocd-cm", Namespace: ArgoCDNamespace, Labels: partOf},
			Data: map[string]string{
				"application.sync.impersonation.enabled": "true",
				"timeout.reconciliation":                 ArgoCDResync.String(),
			}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "argocd-secret", Namespace: ArgoCDNamespace, Labels: partOf},
			StringData: map[string]string{"server.secretkey": "eva-e2e"}},
	} {
		if err := c.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	redis, err := miniredis.Run()
	if err != nil {
		return nil, fmt.Errorf("starting Redis for Argo CD: %w", err)
	}
	// miniredis expires keys only when told time has passed: tell it every second, or
	// Argo CD's cached branch resolutions (and every other TTL) would never expire.
	ticking := make(chan struct{})
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ticking:
				return
			case <-tick.C:
				redis.FastForward(time.Second)
			}
		}
	}()
	stopRedis := func() { close(ticking); redis.Close() }
	home := filepath.Join(c.Dir, "argocd")
	for _, d := range []string{"tls", "ssh", "gnupg", "tmp", "bin"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			stopRedis()
			return nil, err
		}
	}
	// The repo server runs "helm" (and git) from PATH.
	if err := os.Symlink(bins.Helm, filepath.Join(home, "bin", "helm")); err != nil && !os.IsExist(err) {
		stopRedis()
		return nil, err
	}
	env := func(name string) []string {
		return []string{
			"ARGOCD_BINARY_NAME=" + name, "KUBECONFIG=" + c.KubeConfig, "HOME=" + home, "TMPDIR=" + filepath.Join(home, "tmp"),
			// Argo CD's own knob for running outside the cluster it manages: its
			// in-cluster destination (https://kubernetes.default.svc) is KUBECONFIG's.
			"ARGOCD_FAKE_IN_CLUSTER=true",
			// What argocd-cm's timeout.reconciliation sets in an installation: also how
			// long the repo server keeps a branch's resolved commit.
			"ARGOCD_RECONCILIATION_TIMEOUT=" + ArgoCDResync.String(),
			// What argocd-cmd-params-cm's controller.resource.health.persist sets, as
			// docs/argocd.md asks: resource health (and why a module is Degraded) in the
			// Application, where Eva reads it.
			"ARGOCD_APPLICATION_CONTROLLER_PERSIST_RESOURCE_HEALTH=true",
			"PATH=" + filepath.Join(home, "bin") + string(os.PathListSeparator) + os.Getenv("PATH"),
			"ARGOCD_GPG_ENABLED=false", "ARGOCD_TLS_DATA_PATH=" + filepath.Join(home, "tls"),
			"ARGOCD_SSH_DATA_PATH=" + filepath.Join(home, "ssh"), "ARGOCD_GNUPGHOME=" + filepath.Join(home, "gnupg"),
		}
	}
	stop = func() {
		c.stopProcesses("argocd-application-controller", "argocd-repo-server")
		stopRedis()
	}
	port := freePort()
	repoServer := fmt.Sprintf("127.0.0.1:%d", port)
	if err := c.startWith("argocd-repo-server", bins.ArgoCD, env("argocd-repo-server"),
		"--address=127.0.0.1", fmt.Sprintf("--port=%d", port), "--disable-tls", "--redis="+redis.Addr(),
		fmt.Sprintf("--metrics-port=%d", freePort()), "--loglevel=info"); err != nil {
		stop()
		return nil, err
	}
	if err := c.startWith("argocd-application-controller", bins.ArgoCD, env("argocd-application-controller"),
		"--namespace="+ArgoCDNamespace, "--repo-server="+repoServer, "--repo-server-plaintext", "--redis="+redis.Addr(),
		fmt.Sprintf("--metrics-port=%d", freePort()), fmt.Sprintf("--app-resync=%d", int(ArgoCDResync.Seconds())),
		"--status-processors=4", "--operation-processors=4", "--loglevel=info"); err != nil {
		stop()
		return nil, err
	}
	if err := c.settle(stop); err != nil {
		return nil, err
	}
	return stop, nil
}
