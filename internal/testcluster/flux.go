package testcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// FluxNamespace is where the Flux controllers' sources and the tenants' Kustomizations
// live, as in a Flux installation.
const FluxNamespace = "flux-system"

// HelmControllerConcurrency is helm-controller's --concurrent here. helm-controller holds
// a worker for as long as a release's install or upgrade waits for its workloads (up to
// the release's timeout): with four, Flux's default, the suite's parallel scenarios (a
// 50-tenant fleet among them) queued a failing release's retries for over ten minutes
// in one CI run. Eight, as a platform team running many tenants sets it.
const HelmControllerConcurrency = 8

// StartFlux installs Flux's CRDs (generated from the API versions the controllers were
// built against) and starts the real source-, kustomize- and helm-controller, watching
// every namespace, without leader election, serving on 127.0.0.1, kustomize- and
// helm-controller in lockdown mode (--no-cross-namespace-refs).
func (c *Cluster) StartFlux(ctx context.Context) error {
	bins, err := Binaries()
	if err != nil {
		return err
	}
	if err := built(bins.SourceController, bins.KustomizeController, bins.HelmController); err != nil {
		return err
	}
	versions, err := Versions()
	if err != nil {
		return err
	}
	var crdDirs []string
	for _, name := range []string{"source-controller", "kustomize-controller", "helm-controller"} {
		dir := filepath.Join(filepath.Dir(bins.Kwok), "crds", name+"-v"+versions[name])
		if err := built(dir); err != nil {
			return err
		}
		crdDirs = append(crdDirs, dir)
	}
	if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{Paths: crdDirs, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("installing Flux's CRDs: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: FluxNamespace}}
	if err := c.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// The main controllers leave the objects of Flux shards (sharding.fluxcd.io/key)
	// to the shards' own controllers (StartFluxShard), as Flux's sharding set-up does.
	if err := c.startFluxControllers("", "!"+FluxShardKey); err != nil {
		return err
	}
	// Give the controllers a moment to fail on a bad flag or a missing CRD.
	time.Sleep(2 * time.Second)
	return c.Check()
}

// FluxShardKey is the label Flux's controllers shard by.
const FluxShardKey = "sharding.fluxcd.io/key"

// StartFluxShard starts a Flux shard: a source-, kustomize- and helm-controller that
// reconcile only the objects labelled sharding.fluxcd.io/key=<shard> (StartFlux's
// controllers leave those alone). stop kills them.
func (c *Cluster) StartFluxShard(shard string) (stop func(), err error) {
	suffix := "-shard-" + shard
	stop = func() {
		c.stopProcesses("source-controller"+suffix, "kustomize-controller"+suffix, "helm-controller"+suffix)
	}
	if err := c.startFluxControllers(suffix, FluxShardKey+"="+shard); err != nil {
		stop()
		return nil, err
	}
	if err := c.settle(stop); err != nil {
		return nil, err
	}
	return stop, nil
}

// startFluxControllers starts one set of Flux controllers (names ending in suffix)
// watching the objects the label selector matches, source-controller with its own
// artifact storage.
func (c *Cluster) startFluxControllers(suffix, selector string) error {
	bins, err := Binaries()
	if err != nil {
		return err
	}
	storage := filepath.Join(c.Dir, "source-controller"+suffix)
	if err := os.MkdirAll(storage, 0o755); err != nil {
		return err
	}
	common := func() []string {
		return []string{
			"--watch-all-namespaces=true", "--enable-leader-election=false", "--watch-label-selector=" + selector,
			fmt.Sprintf("--metrics-addr=127.0.0.1:%d", freePort()), fmt.Sprintf("--health-addr=127.0.0.1:%d", freePort()),
			"--log-level=info", "--requeue-dependency=5s",
		}
	}
	artifacts := fmt.Sprintf("127.0.0.1:%d", freePort())
	if err := c.start("source-controller"+suffix, bins.SourceController, append(common(),
		"--storage-path="+storage, "--storage-addr="+artifacts, "--storage-adv-addr="+artifacts)...); err != nil {
		return err
	}
	// Lockdown mode, as Flux recommends for multi-tenant clusters: no object may refer
	// to a source or dependency in another namespace.
	if err := c.start("kustomize-controller"+suffix, bins.KustomizeController, append(common(), "--concurrent=4", "--no-cross-namespace-refs=true")...); err != nil {
		return err
	}
	return c.start("helm-controller"+suffix, bins.HelmController, append(common(),
		fmt.Sprintf("--concurrent=%d", HelmControllerConcurrency), "--no-cross-namespace-refs=true")...)
}
