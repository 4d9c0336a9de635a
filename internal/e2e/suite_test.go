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

	"github.com/aidonow/eva/internal/testcluster"
	"github.com/aidonow/eva/internal/testenv"
)

// podStartDelay is kwok's stand-in for image pulls and container start: a pod becomes
// Ready this long after it is scheduled (a Job's pod Succeeds as long after that).
const podStartDelay = 2 * time.Second

var (
	cluster *testcluster.Cluster
	gitSrv  *testcluster.Server
	charts  *testcluster.Server
	gitRoot string
	evactl  string
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
	ctx := context.Background()
	root := testenv.RepoRoot()
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
	if err := applyFile(ctx, filepath.Join(root, "base", "rbac", "deployer_role.yaml")); err != nil {
		return 0, err
	}
	gitRoot = filepath.Join(cluster.Dir, "git")
	if _, err := git.PlainInit(filepath.Join(gitRoot, "fleet.git"), true); err != nil {
		return 0, err
	}
	if gitSrv, err = testcluster.GitServer(gitRoot); err != nil {
		return 0, err
	}
	defer gitSrv.Close()
	if charts, err = testcluster.ChartRepository(filepath.Join(root, "charts"), cluster.Dir); err != nil {
		return 0, err
	}
	defer charts.Close()
	evactl = filepath.Join(cluster.Dir, "evactl")
	build := exec.Command("go", "build", "-o", evactl, "./cmd/evactl")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("building evactl: %v\n%s", err, out)
	}
	return m.Run(), nil
}

// applyFile creates every object of a YAML file (documents separated by ---).
func applyFile(ctx context.Context, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return applyYAML(ctx, string(data))
}

// applyYAML server-side applies every object of a YAML text as the test.
func applyYAML(ctx context.Context, text string) error {
	for _, doc := range splitDocuments(text) {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return err
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := cluster.Client.Patch(ctx, &u, client.Apply, client.FieldOwner("eva-e2e"), client.ForceOwnership); err != nil {
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
