package controller

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/publish"
)

// TestGitOpsCoalescesATenantChangingOften is issue 37's finding 7: a tenant patched
// without end made one commit per batch window, growing the shared repository. With a
// publish interval its changes coalesce: ten spec changes over three seconds make one
// commit after the first, holding the last spec. The interval is far longer than the
// changes take even on a loaded machine, so they always fall within one interval.
func TestGitOpsCoalescesATenantChangingOften(t *testing.T) {
	bare := newBare(t)
	ensureFluxNamespace(t)
	sink := &publish.GitRemote{URL: bare, Branch: "main", CacheDir: filepath.Join(t.TempDir(), "cache")}
	batcher := &publish.Batcher{Sink: sink, Window: 100 * time.Millisecond}
	startOperatorWith(t, "", func(r *EvaTenantReconciler, _ ctrl.Manager) {
		r.GitOps = &GitOps{Batcher: batcher, Revisions: sink, MinInterval: 20 * time.Second}
	})
	ns := newTestNamespace(t)
	tn := newTenant(ns, "CHATTY", evav1.TierStarter)
	createTenant(t, tn)
	ctx := context.Background()
	published := func(seeds string) func() error {
		return func() error {
			tree := gitShow(t, bare, "show", "refs/heads/main:tenants/chatty/workloads/manifests.yaml")
			if !strings.Contains(tree, seeds) {
				return fmt.Errorf("the tree does not hold %s yet", seeds)
			}
			return nil
		}
	}
	eventually(t, waitFor, "the first publish", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(tn), tn); err != nil {
			return err
		}
		if tn.Status.Revision == "" {
			return fmt.Errorf("not published")
		}
		return nil
	})
	before := commitCount(t, bare)
	for i := range 10 {
		seeds := fmt.Sprintf("seeds-1.0.%d", i)
		eventually(t, waitFor, "updating the spec", func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(tn), tn); err != nil {
				return err
			}
			tn.Spec.SeedsVersion = seeds
			return k8s.Update(ctx, tn)
		})
		time.Sleep(300 * time.Millisecond)
	}
	eventually(t, 2*waitFor, "the last spec published", published("seeds-1.0.9"))
	if got := commitCount(t, bare) - before; got > 2 {
		t.Errorf("%d commits for ten changes within the publish interval, want at most 2", got)
	}
}

func commitCount(t *testing.T, bare string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(gitShow(t, bare, "rev-list", "--count", "refs/heads/main"), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// failingSink refuses every publish, as a registry or git server that is down.
type failingSink struct{}

func (failingSink) Publish(context.Context, publish.Update, publish.Safety) (*publish.Result, error) {
	return nil, fmt.Errorf("the remote is down")
}

// TestPublishIntervalHoldsAcrossFailures: a failed publish is submitted again at once
// (the reconcile's backoff paces it), but another change of the tenant still waits out
// the interval from that submission; a helper's review found the failure cleared it.
func TestPublishIntervalHoldsAcrossFailures(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	g := &GitOps{Batcher: &publish.Batcher{Sink: failingSink{}, Window: time.Millisecond}, MinInterval: time.Minute,
		Now: func() time.Time { return now }}
	tn := newTenant("default", "FAILED", evav1.TierStarter)
	tn.UID = "uid-failed"
	if done, _, _ := g.publish(tn, "d1", nil); done {
		t.Fatal("a new submission reported done")
	}
	var err error
	eventually(t, 10*time.Second, "the publish to fail", func() error {
		var done bool
		if done, _, err = g.publish(tn, "d1", nil); !done {
			return fmt.Errorf("not done")
		}
		return nil
	})
	if err == nil {
		t.Fatal("the failing sink published")
	}
	now = now.Add(10 * time.Second)
	if wait := g.holdBack(tn.UID, "d1"); wait != 0 {
		t.Errorf("the same files wait %v after a failure, want 0 (retried with backoff)", wait)
	}
	if wait := g.holdBack(tn.UID, "d2"); wait != 50*time.Second {
		t.Errorf("another change waits %v after a failed publish, want the rest of the interval, 50s", wait)
	}
	now = now.Add(time.Minute)
	if wait := g.holdBack(tn.UID, "d2"); wait != 0 {
		t.Errorf("another change waits %v once the interval is over", wait)
	}
}
