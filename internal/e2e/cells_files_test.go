package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// TestCellsMoveATenantFile moves a tenant file from cell eu-1 (this suite's cluster) to
// us-1 (a second cluster) with evactl publish git, run again and again as a scheduled
// job would, each cell's tree applied by its own cluster's real Flux; every third run
// is SIGKILLed at a moment of its own. The tenant ends served by us-1 from the us-1
// tree alone, eu-1's tree and cluster hold nothing of it, and while it moved both cells
// served it for a while and neither never.
func TestCellsMoveATenantFile(t *testing.T) {
	if os.Getenv(cellsE2E) == "" {
		t.Skip("two clusters with Flux each: run with make e2e-cells")
	}
	ctx := context.Background()
	cell, _ := startCell(t)
	cellsDir := cellsOverlays(t)
	const source = "cell-files"
	if err := setSettings(filepath.Join(cellsDir, "dev", "tenant", overlay.SettingsFile), gitOpsSource("GitRepository", source)); err != nil {
		t.Fatal(err)
	}
	url := newGitRepository(t, source+".git")
	clusters := map[string]client.Client{"eu-1": cluster.Client, "us-1": cell.Client}
	for name, c := range clusters {
		if err := bootstrapSourceOn(ctx, c, "GitRepository", source, url, "main", "5s", "./cells/"+name); err != nil {
			t.Fatal(err)
		}
	}
	trees := gitTrees(filepath.Join(gitRoot, source+".git"))
	const code = "CELFMA"
	tenants := t.TempDir()
	file := filepath.Join(tenants, code+".yaml")
	writeTenantFile := func(cell string) {
		body := fmt.Sprintf("apiVersion: eva.aidonow.com/v1alpha1\nkind: EvaTenant\nmetadata:\n  name: %s\n  namespace: eva-system\nspec:\n  capsuleCode: %s\n  tier: Starter\n  placement:\n    cell: %s\n",
			strings.ToLower(code), code, cell)
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"publish", "git", "--repo", url, "--branch", "main", "--env", "dev", "--overlays", cellsDir,
		"--tenants", tenants, "--verify-charts=false", "--cache-dir", t.TempDir(), "--move-drain", "10s",
		"--cell-kubeconfig", "eu-1=" + cluster.KubeConfig, "--cell-kubeconfig", "us-1=" + cell.KubeConfig}
	// What every run said, and the error of one that failed unkilled (written by the
	// runs' goroutine, read by the test).
	var mu sync.Mutex
	var outputs strings.Builder
	var runErr error
	said := func() (string, error) {
		mu.Lock()
		defer mu.Unlock()
		return outputs.String(), runErr
	}
	run := func(kill time.Duration) error {
		cmd := exec.Command(evactl, args...)
		cmd.Dir = testenv.RepoRoot()
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			return err
		}
		if kill > 0 {
			time.Sleep(kill)
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
		err := cmd.Wait()
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(&outputs, "--- run (killed after %s): %v\n%s", kill, err, out.String())
		if kill > 0 {
			return nil
		}
		if err != nil {
			runErr = err
		}
		return err
	}
	modules := len(tenant.DefaultCatalog().ModulesOf("Starter"))
	writeTenantFile("eu-1")
	if err := run(0); err != nil {
		out, _ := said()
		t.Fatalf("evactl publish git: %v\n%s", err, out)
	}
	poll(t, "eu-1 serves "+code, within(t, 5*time.Minute), func() error {
		if !servingOn(ctx, cluster.Client, code) {
			return fmt.Errorf("no Ingress address on eu-1")
		}
		return deliveredOn(ctx, cluster.Client, code, modules, true)
	})

	writeTenantFile("us-1")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var runs, killed int // the runs' goroutine's until wg.Wait
	wg.Go(func() {
		for runs = 1; ; runs++ {
			select {
			case <-stop:
				return
			default:
			}
			var kill time.Duration
			if runs%3 == 0 {
				kill = time.Duration(100+rand.IntN(1400)) * time.Millisecond
				killed++
			}
			if err := run(kill); err != nil {
				return
			}
			time.Sleep(2 * time.Second)
		}
	})
	var window availability
	deadline := time.Now().Add(within(t, 8*time.Minute))
	for {
		eu, us := servingOn(ctx, cluster.Client, code), servingOn(ctx, cell.Client, code)
		window.observe(eu, us)
		gone, err := namespaceGone(ctx, cluster.Client, code)
		if err != nil {
			t.Fatal(err)
		}
		if gone && us && !trees.holds(t, "eu-1", code) {
			break
		}
		if out, err := said(); err != nil || time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			fatalf(t, "the move of %s did not end (run error %v; eu-1 serves %v, us-1 %v, eu-1 namespace gone %v); evactl said:\n%s",
				code, err, eu, us, gone, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("%s; %d evactl runs, %d of them SIGKILLed", window.String(), runs, killed)
	if window.neither > 0 {
		out, _ := said()
		t.Errorf("%s: a window without a serving cell; evactl said:\n%s", window.String(), out)
	}
	if err := deliveredOn(ctx, cell.Client, code, modules, true); err != nil {
		t.Errorf("on us-1 after the move: %v", err)
	}
	if err := deliveredOn(ctx, cluster.Client, code, modules, false); err != nil {
		t.Errorf("on eu-1 after the move: %v", err)
	}
	if !trees.holds(t, "us-1", code) {
		t.Error("us-1's tree lost the tenant")
	}
	diff := exec.Command(evactl, "diff", "--exit-code", "--repo", url, "--branch", "main", "--env", "dev", "--overlays", cellsDir,
		"--tenants", tenants, "--verify-charts=false", "--cache-dir", t.TempDir())
	diff.Dir = testenv.RepoRoot()
	if out, err := diff.CombinedOutput(); err != nil {
		t.Errorf("evactl diff after the move: %v\n%s", err, out)
	}
}

// namespaceGone says whether the tenant's namespace is gone from c.
func namespaceGone(ctx context.Context, c client.Client, code string) (bool, error) {
	err := c.Get(ctx, types.NamespacedName{Name: tenant.Namespace(code)}, &corev1.Namespace{})
	if client.IgnoreNotFound(err) != nil {
		return false, err
	}
	return err != nil, nil
}
