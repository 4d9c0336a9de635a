package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/aidonow/eva/internal/chartrepo"
	"github.com/aidonow/eva/internal/messaging"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/testcluster"
	"github.com/aidonow/eva/internal/testenv"
)

// fleetRepo is the GitOps repository on the git server: what evactl and the operator
// publish to, and what the platform's GitRepository eva-tenants (the dev environment's
// gitopsSource) fetches.
const fleetRepo = "fleet.git"

// podStartDelay is kwok's stand-in for image pulls and container start: a pod becomes
// Ready this long after it is scheduled (a Job's pod Succeeds as long after that). Short
// for the scenarios; `make sla` sets a realistic one (EVA_E2E_POD_START_DELAY).
var podStartDelay = 2 * time.Second

var (
	cluster *testcluster.Cluster
	gitSrv  *testcluster.Server
	// registry is the OCI registry `evactl publish oci` and `evactl charts push` push to.
	registry *testcluster.Server
	// chartsDir is a copy of the repository's charts/ whose published.yaml lists what
	// `evactl charts push` pushed to the registry (the repository's own stays untouched).
	chartsDir string
	// overlays is a copy of the repository's overlays/ whose dev environment takes its
	// charts from there (chartSource.url): every scenario runs with kustomize- and
	// helm-controller in lockdown mode (--no-cross-namespace-refs), where a shared chart
	// source in flux-system is refused.
	overlays string
	gitRoot  string
	evactl   string
	// jetstream reaches the embedded JetStream server the NACK stand-in creates streams in.
	jetstream *messaging.Client
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	if err := takeOverParallel(); err != nil {
		return 0, err
	}
	ctx := context.Background()
	root := testenv.RepoRoot()
	if v := os.Getenv("EVA_E2E_POD_START_DELAY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, fmt.Errorf("EVA_E2E_POD_START_DELAY: %w", err)
		}
		podStartDelay = d
	}
	crds := filepath.Join(root, "internal", "testenv", "crds", "addons")
	var err error
	cluster, err = testcluster.Start(ctx, testcluster.Options{
		CRDDirs:       []string{filepath.Join(root, "base", "crd", "bases"), crds},
		PodStartDelay: podStartDelay,
	})
	if err != nil {
		return 0, err
	}
	defer cluster.Stop()
	if err := cluster.StartFlux(ctx); err != nil {
		return 0, err
	}
	gitRoot = filepath.Join(cluster.Dir, "git")
	if _, err := git.PlainInit(filepath.Join(gitRoot, fleetRepo), true); err != nil {
		return 0, err
	}
	if gitSrv, err = testcluster.GitServer(gitRoot); err != nil {
		return 0, err
	}
	defer gitSrv.Close()
	if registry, err = testcluster.OCIRegistry(); err != nil {
		return 0, err
	}
	defer registry.Close()
	// The dev environment's gitopsSource, fed by `evactl publish git` (cli_test.go).
	if err := bootstrapSource(ctx, "GitRepository", "eva-tenants", gitSrv.URL+"/"+fleetRepo, "main", "10s"); err != nil {
		return 0, err
	}
	if err := installOperatorChart(cluster.KubeConfig); err != nil {
		return 0, err
	}
	// JetStream, real and embedded, and the two stand-ins the cluster cannot do without.
	var stopMessaging func()
	if jetstream, stopMessaging, err = cluster.StartMessaging(ctx); err != nil {
		return 0, err
	}
	defer stopMessaging()

	if evactl, err = testenv.Binary("./cmd/evactl", "evactl-test"); err != nil {
		return 0, err
	}
	if err := publishCharts(root); err != nil {
		return 0, err
	}
	secrets, err := createDecryptionKeys(ctx)
	if err != nil {
		return 0, err
	}
	// The dev environment decrypts each tenant's Secrets with the tenant's own key.
	if err := setSettings(filepath.Join(overlays, "dev", "tenant", overlay.SettingsFile), map[string]any{"secrets": secrets}); err != nil {
		return 0, err
	}
	code := m.Run()
	writeReport(os.Stdout)
	return code, nil
}

// publishCharts publishes the module charts as a platform team does, with `evactl
// charts push` (from a copy of charts/) to the suite's registry, and writes the suite's
// overlays: the repository's, with the dev environment's chartSource pointing there.
func publishCharts(root string) error {
	chartsDir = filepath.Join(cluster.Dir, "charts")
	if err := os.CopyFS(chartsDir, os.DirFS(filepath.Join(root, "charts"))); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(chartsDir, chartrepo.LockFile))
	push := exec.Command(evactl, "charts", "push", "--charts", chartsDir, "--to", chartSourceURL(), "--insecure")
	if out, err := push.CombinedOutput(); err != nil {
		return fmt.Errorf("evactl charts push: %v\n%s", err, out)
	}
	if err := samePublished(filepath.Join(chartsDir, chartrepo.LockFile), filepath.Join(root, "charts", chartrepo.LockFile)); err != nil {
		return err
	}
	overlays = filepath.Join(cluster.Dir, "overlays")
	if err := os.CopyFS(overlays, os.DirFS(filepath.Join(root, "overlays"))); err != nil {
		return err
	}
	return setSettings(filepath.Join(overlays, "dev", "tenant", overlay.SettingsFile), map[string]any{
		"chartSource": map[string]any{"kind": "HelmRepository", "name": "eva-charts", "url": chartSourceURL(), "insecure": true},
	})
}

// samePublished checks that what a registry holds after a push (pushed, the lock evactl
// charts push wrote) is what the repository's charts/published.yaml, which the release's
// evactl and operator carry and pin, says of each version.
func samePublished(pushed, shipped string) error {
	got, err := chartrepo.ReadLock(pushed)
	if err != nil {
		return err
	}
	want, err := chartrepo.ReadLock(shipped)
	if err != nil {
		return err
	}
	for _, chart := range got.Names() {
		for _, version := range got.Versions(chart) {
			g, _ := got.Find(chart, version)
			if w, ok := want.Find(chart, version); !ok || w != g {
				return fmt.Errorf("%s %s: the registry holds %+v, %s says %+v (run make manifests)", chart, version, g, shipped, w)
			}
		}
	}
	return nil
}

// chartSourceURL is where the suite's charts are published.
func chartSourceURL() string { return "oci://" + registry.Host() + "/eva/charts" }

// installOperatorChart installs the operator's chart as a user does, with Helm, for the
// dev environment and the identities of cells eu-1 and us-1 (the two-cluster scenarios,
// cells_test.go, where this cluster is the fleet's), with no replica: the operator runs
// here as a process.
func installOperatorChart(kubeconfig string) error {
	return testcluster.InstallOperatorChart(context.Background(), kubeconfig,
		map[string]any{"env": "dev", "cellIdentities": []any{"eu-1", "us-1"}})
}

// applyYAML server-side applies every object of a YAML text as the test.
func applyYAML(ctx context.Context, text string) error { return applyYAMLOn(ctx, cluster.Client, text) }

// applyYAMLOn server-side applies a YAML stream on cluster c.
func applyYAMLOn(ctx context.Context, c client.Client, text string) error {
	for _, doc := range splitDocuments(text) {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return err
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Patch(ctx, &u, client.Apply, client.FieldOwner("eva-e2e"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// splitDocuments splits a YAML stream at its "---" lines.
func splitDocuments(text string) []string {
	var docs []string
	for _, doc := range strings.Split("\n"+text, "\n---") {
		if strings.TrimSpace(doc) != "" {
			docs = append(docs, doc)
		}
	}
	return docs
}
