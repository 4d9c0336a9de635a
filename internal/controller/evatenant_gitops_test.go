package controller

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/publish"
)

func gitShow(t testing.TB, bare string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", bare}, args...)...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func gitOpsOperator(t *testing.T, bare string, window time.Duration) *publish.Batcher {
	t.Helper()
	ensureFluxNamespace(t)
	sink := &publish.GitRemote{URL: bare, Branch: "main", CacheDir: filepath.Join(t.TempDir(), "cache")}
	batcher := &publish.Batcher{Sink: sink, Window: window}
	startOperatorWith(t, "", func(r *EvaTenantReconciler, _ ctrl.Manager) {
		r.GitOps = &GitOps{Batcher: batcher, Revisions: sink}
	})
	return batcher
}

func ensureFluxNamespace(t *testing.T) {
	err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flux-system"}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func newBare(t *testing.T) string {
	bare := filepath.Join(t.TempDir(), "fleet.git")
	if _, err := git.PlainInit(bare, true); err != nil {
		t.Fatal(err)
	}
	return bare
}

// TestGitOpsBatchesCommits needs only the repository: the way from a commit through
// Flux to Active and back is tested with the real Flux controllers in
// internal/e2e/gitops_test.go.
func TestGitOpsBatchesCommits(t *testing.T) {
	bare := newBare(t)
	gitOpsOperator(t, bare, 500*time.Millisecond)
	ns := newTestNamespace(t)
	const n = 200
	for i := range n {
		tn := newTenant(ns, fmt.Sprintf("GB%c%c%c%c", 'A'+i/17576%26, 'A'+i/676%26, 'A'+i/26%26, 'A'+i%26), evav1.TierStarter)
		createTenant(t, tn)
	}
	eventually(t, 3*waitFor, "every tenant published", func() error {
		var list evav1.EvaTenantList
		if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		done := 0
		for _, tn := range list.Items {
			if tn.Status.Revision != "" {
				done++
			}
		}
		if done != n {
			return fmt.Errorf("%d of %d published", done, n)
		}
		return nil
	})
	commits := gitShow(t, bare, "rev-list", "--count", "refs/heads/main")
	files := gitShow(t, bare, "ls-tree", "-r", "--name-only", "refs/heads/main")
	if got := strings.Count(files, "/workloads/manifests.yaml"); got != n {
		t.Fatalf("%d tenants in the tree, want %d", got, n)
	}
	var count int
	if _, err := fmt.Sscan(commits, &count); err != nil {
		t.Fatalf("commit count %q: %v", commits, err)
	}
	t.Logf("%d tenants applied together were published in %d commits", n, count)
	// Reconciles do not wait for their batch: a batch gathers far more tenants than the
	// operator's 4 concurrent reconciles (reconciles waiting for their batch make 50
	// commits of 4; the tenants are created over a few batch windows).
	if count > n/8 {
		t.Errorf("%d commits for %d tenants: batches no larger than the reconciles running at once", count, n)
	}
}
