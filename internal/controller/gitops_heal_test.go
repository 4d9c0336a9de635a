package controller

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/status"
)

// askedRevisions is a sink's Revisions that records which tenant folders were looked up
// (so a test knows an operator has checked each tenant).
type askedRevisions struct {
	publish.Revisions
	mu    sync.Mutex
	asked map[string]bool
}

func (a *askedRevisions) TenantDigest(ctx context.Context, revision, dir string) (string, error) {
	a.mu.Lock()
	a.asked[dir] = true
	a.mu.Unlock()
	return a.Revisions.TenantDigest(ctx, revision, dir)
}

func (a *askedRevisions) wasAsked(dirs ...string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, d := range dirs {
		if !a.asked[d] {
			return fmt.Errorf("tenant %s not checked yet", d)
		}
	}
	return nil
}

// TestGitOpsRepublishesWhatWentMissing: one operator publishes three tenants and stops.
// Someone rewrites the branch's history without the third tenant's files (a force-push).
// A new operator process, with an empty cache and no memory of the publishes, judges each
// tenant by what the branch holds: the third is published again (one commit, its files
// only, a Republished warning), the other two are not touched.
func TestGitOpsRepublishesWhatWentMissing(t *testing.T) {
	bare := newBare(t)
	ensureFluxNamespace(t)
	var publishes []*publish.Plan
	var mu sync.Mutex
	start := func() (*operator, *askedRevisions) {
		sink := &publish.GitRemote{URL: bare, Branch: "main", CacheDir: filepath.Join(t.TempDir(), "cache")}
		revisions := &askedRevisions{Revisions: sink, asked: map[string]bool{}}
		batcher := &publish.Batcher{Sink: sink, Window: 200 * time.Millisecond, OnPublish: func(_ time.Duration, res *publish.Result, err error) {
			if err == nil {
				mu.Lock()
				publishes = append(publishes, res.Plan)
				mu.Unlock()
			}
		}}
		op := startOperatorWith(t, "", func(r *EvaTenantReconciler, _ ctrl.Manager) {
			r.GitOps = &GitOps{Batcher: batcher, Revisions: revisions}
		})
		return op, revisions
	}
	first, _ := start()
	ns := newTestNamespace(t)
	var tenants []*evav1.EvaTenant
	for _, code := range []string{"HEALAA", "HEALAB", "HEALAC"} {
		tn := newTenant(ns, code, evav1.TierStarter)
		createTenant(t, tn)
		tenants = append(tenants, tn)
	}
	eventually(t, waitFor, "every tenant published", func() error {
		for _, tn := range tenants {
			var got evav1.EvaTenant
			if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(tn), &got); err != nil {
				return err
			}
			if got.Status.Revision == "" {
				return fmt.Errorf("%s not published", tn.Name)
			}
		}
		return nil
	})
	first.stop()

	gone := render.DirName("HEALAC")
	forcePushWithout(t, bare, render.TenantsDir+"/"+gone, render.FluxDir+"/"+gone+".yaml")
	mu.Lock()
	publishes = nil
	mu.Unlock()
	_, asked := start()
	eventually(t, waitFor, "HEALAC published again", func() error {
		if files := gitShow(t, bare, "ls-tree", "-r", "--name-only", "refs/heads/main"); !strings.Contains(files, render.TenantsDir+"/"+gone+"/") {
			return fmt.Errorf("the branch does not hold %s's files", gone)
		}
		mu.Lock()
		n := len(publishes)
		mu.Unlock()
		if n == 0 {
			return fmt.Errorf("the publish is not reported yet") // OnPublish runs after the push
		}
		return asked.wasAsked(render.DirName("HEALAA"), render.DirName("HEALAB"))
	})
	mu.Lock()
	defer mu.Unlock()
	if len(publishes) != 1 || !slices.Equal(publishes[0].Added, []string{gone}) || len(publishes[0].Changed)+len(publishes[0].Removed) > 0 {
		var got []string
		for _, p := range publishes {
			got = append(got, strings.TrimSpace(p.Summary()))
		}
		t.Errorf("the restarted operator published %q; want one publish adding %s only", got, gone)
	}
	for i, tn := range tenants {
		republished := slices.Contains(eventReasons(t, tn), status.EventRepublished)
		if want := i == 2; republished != want {
			t.Errorf("%s: Republished event recorded %v, want %v", tn.Name, republished, want)
		}
	}
}

// forcePushWithout rewrites the branch's last commit without the given paths and
// force-pushes it, as someone cleaning up by hand would.
func forcePushWithout(t *testing.T, bare string, paths ...string) {
	t.Helper()
	work := filepath.Join(t.TempDir(), "work")
	runGit(t, filepath.Dir(work), "clone", "-q", "--branch", "main", bare, work)
	runGit(t, work, append([]string{"rm", "-r", "-q"}, paths...)...)
	runGit(t, work, "commit", "-q", "--amend", "-m", "clean up by hand")
	runGit(t, work, "push", "-q", "--force", "origin", "main")
}

// runGit runs the git command line in dir as someone editing the fleet repository by
// hand, without the machine's git configuration.
func runGit(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=someone", "GIT_AUTHOR_EMAIL=someone@example.com",
		"GIT_COMMITTER_NAME=someone", "GIT_COMMITTER_EMAIL=someone@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}
