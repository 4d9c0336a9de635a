// Package testenv starts a real kube-apiserver and etcd (controller-runtime's envtest)
// for tests, with Eva's CRD and any extra CRD folders installed.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// RepoRoot returns the root of the Eva source tree.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// AssetsDir finds the kube-apiserver and etcd binaries: KUBEBUILDER_ASSETS when set,
// else the newest build under bin/k8s made by hack/envtest-binaries.sh.
func AssetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	matches, _ := filepath.Glob(filepath.Join(RepoRoot(), "bin", "k8s", "*", "kube-apiserver"))
	if len(matches) == 0 {
		return "", fmt.Errorf("no envtest binaries: run 'make envtest' (or 'make test'), or set KUBEBUILDER_ASSETS")
	}
	sort.Strings(matches)
	return filepath.Dir(matches[len(matches)-1]), nil
}

// Env is a running API server.
type Env struct {
	env    *envtest.Environment
	stop   func() error
	Config *rest.Config
	// Client is an uncached client that knows Eva's types.
	Client client.Client
}

// ControlPlaneGOGC is the garbage collector target of the test's control plane (the
// API server, etcd, and in the end-to-end cluster its controllers and Flux's), unless
// GOGC is set: a test's control plane holds a few hundred objects, so memory is cheap
// and collector CPU is not. With Go's default (100) a fifth of the end-to-end API
// server's CPU went to collection (a CPU profile during the suite), on a 2-core machine
// where make test is CPU-bound. Eva's own binaries run as deployed, with their own
// setting (cmd/eva-operator/gc.go).
const ControlPlaneGOGC = "400"

// ControlPlaneEnv is the environment a control-plane process gets besides the test
// process's: GOGC=ControlPlaneGOGC unless the test process has GOGC set.
func ControlPlaneEnv() []string {
	if _, set := os.LookupEnv("GOGC"); set {
		return nil
	}
	return []string{"GOGC=" + ControlPlaneGOGC}
}

// Start starts an API server with Eva's CRD and the CRDs in extraCRDDirs installed.
func Start(extraCRDDirs ...string) (*Env, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	if err := evav1.AddToScheme(scheme.Scheme); err != nil {
		return nil, fmt.Errorf("registering Eva types: %w", err)
	}
	e := &envtest.Environment{
		CRDDirectoryPaths:     append([]string{filepath.Join(RepoRoot(), "base", "crd", "bases")}, extraCRDDirs...),
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, stop, err := StartEnvironment(e)
	if err != nil {
		return nil, fmt.Errorf("starting envtest from %s: %w", assets, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		_ = stop()
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return &Env{env: e, stop: stop, Config: cfg, Client: c}, nil
}

// Stop stops the API server and etcd.
func (e *Env) Stop() error { return e.stop() }

// GVK returns the GroupVersionKind of an Eva kind.
func GVK(kind string) schema.GroupVersionKind { return evav1.GroupVersion.WithKind(kind) }

// KubeConfig returns a kubeconfig for the API server (for kubectl and scripts).
func (e *Env) KubeConfig() []byte { return e.env.KubeConfig }

// KubeConfigFile writes the kubeconfig into dir and returns its path.
func (e *Env) KubeConfigFile(dir string) (string, error) {
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, e.env.KubeConfig, 0o600)
}
