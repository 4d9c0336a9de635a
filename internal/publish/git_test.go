package publish

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/aidonow/eva/internal/render"
)

func remoteFor(url, cache string) *GitRemote {
	return &GitRemote{URL: url, Branch: "main", CacheDir: cache, Subject: "test publish"}
}

func TestGitPublishToBareRepository(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	bare := bareRepo(t, root, "fleet.git")
	g := remoteFor(bare, filepath.Join(t.TempDir(), "cache"))

	res, err := g.Publish(ctx, renderUpdate(t, true, codes("DEVX", 5)...), Safety{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Committed || len(res.Plan.Added) != 5 {
		t.Fatalf("first publish: %+v %+v", res, res.Plan)
	}
	if head := gitCLI(t, bare, "rev-parse", "refs/heads/main"); head != res.Revision {
		t.Fatalf("remote head %s, publish said %s", head, res.Revision)
	}
	gitCLI(t, bare, "fsck", "--strict")
	files := treeOf(t, bare, "main")
	if len(files) != 5*5+1 {
		t.Fatalf("%d files in the remote tree, want %d", len(files), 5*5+1)
	}

	// Unchanged: nothing pushed.
	again, err := g.Publish(ctx, renderUpdate(t, true, codes("DEVX", 5)...), Safety{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Committed || again.Revision != res.Revision {
		t.Fatalf("an unchanged publish committed: %+v", again)
	}

	// One tenant changes: one commit touching only its bundle, listing it.
	specs := codes("DEVX", 5)
	specs[2].replicas = 3
	changed, err := g.Publish(ctx, renderUpdate(t, true, specs...), Safety{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := gitCLI(t, bare, "diff", "--name-only", res.Revision, changed.Revision); diff != "tenants/devxac/workloads/manifests.yaml" {
		t.Errorf("changed files: %q", diff)
	}
	if msg := gitCLI(t, bare, "log", "-1", "--format=%B", "refs/heads/main"); !strings.Contains(msg, "Changed: DEVXAC") {
		t.Errorf("commit message: %q", msg)
	}
}

func TestGitPublishUnderPathKeepsTheRest(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	bare := bareRepo(t, root, "platform.git")
	// Someone else's files already live in the repository.
	work := t.TempDir()
	gitCLI(t, work, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(work, "README.md"), []byte("platform repo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitCLI(t, work, "add", "README.md")
	gitCLI(t, work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init")
	gitCLI(t, work, "push", "-q", bare, "main")

	g := remoteFor(bare, filepath.Join(t.TempDir(), "cache"))
	g.Path = "clusters/dev"
	if _, err := g.Publish(ctx, renderUpdate(t, true, codes("PTHX", 2)...), Safety{}); err != nil {
		t.Fatal(err)
	}
	files := treeOf(t, bare, "main")
	if _, ok := files["README.md"]; !ok {
		t.Error("publishing under a path removed a file outside it")
	}
	if _, ok := files["clusters/dev/tenants/pthxaa/manifests.yaml"]; !ok {
		t.Errorf("bundle not under the path: %v", files)
	}
}

func TestGitPublishOverHTTPWithAuth(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	bareRepo(t, root, "fleet.git")
	srv := gitHTTPServer(t, root, "eva", "s3cret")
	cache := filepath.Join(t.TempDir(), "cache")

	g := remoteFor(srv.URL+"/fleet.git", cache)
	g.Auth = &http.BasicAuth{Username: "eva", Password: "wrong"}
	_, err := g.Publish(ctx, renderUpdate(t, true, codes("WEBX", 3)...), Safety{})
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "auth") {
		t.Fatalf("refused auth: err = %v", err)
	}
	if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("the error leaks a credential: %v", err)
	}

	g.Auth = &http.BasicAuth{Username: "eva", Password: "s3cret"}
	res, err := g.Publish(ctx, renderUpdate(t, true, codes("WEBX", 3)...), Safety{})
	if err != nil {
		t.Fatalf("publish after a refused one: %v", err)
	}
	// An independent client sees the same commit.
	clone := filepath.Join(t.TempDir(), "clone")
	url := strings.Replace(srv.URL, "http://", "http://eva:s3cret@", 1) + "/fleet.git"
	gitCLI(t, filepath.Dir(clone), "clone", "-q", url, clone)
	if head := gitCLI(t, clone, "rev-parse", "HEAD"); head != res.Revision {
		t.Fatalf("clone head %s, published %s", head, res.Revision)
	}
	if _, err := os.Stat(filepath.Join(clone, "tenants", "webxab", "manifests.yaml")); err != nil {
		t.Error(err)
	}
}

func TestGitPublishUnreachableRemote(t *testing.T) {
	ctx := context.Background()
	cache := filepath.Join(t.TempDir(), "cache")
	g := remoteFor("http://127.0.0.1:1/nothing.git", cache)
	_, err := g.Publish(ctx, renderUpdate(t, true, codes("NETX", 1)...), Safety{})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("err = %v, want a fetch error naming the remote", err)
	}
	// The same cache then works against a reachable remote.
	bare := bareRepo(t, t.TempDir(), "ok.git")
	g.URL = bare
	if _, err := g.Publish(ctx, renderUpdate(t, true, codes("NETX", 1)...), Safety{}); err != nil {
		t.Fatalf("publish with the same cache: %v", err)
	}
}

func TestGitPublishReportsHookRejection(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	bare := bareRepo(t, root, "guarded.git")
	hook := filepath.Join(bare, "hooks", "pre-receive")
	if err := os.MkdirAll(filepath.Dir(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho 'policy: tenant changes are frozen today' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := gitHTTPServer(t, root, "", "")
	g := remoteFor(srv.URL+"/guarded.git", filepath.Join(t.TempDir(), "cache"))
	_, err := g.Publish(ctx, renderUpdate(t, true, codes("HOKX", 2)...), Safety{})
	if err == nil || !strings.Contains(err.Error(), "tenant changes are frozen today") {
		t.Fatalf("err = %v, want the hook's message", err)
	}
	if errors.Is(err, errRejected) {
		t.Fatalf("a hook refusal was treated as a race and retried: %v", err)
	}
	if out := gitCLI(t, bare, "for-each-ref"); out != "" {
		t.Fatalf("a refused push left refs: %s", out)
	}
	// Once the hook allows it, the same cache publishes.
	if err := os.Remove(hook); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Publish(ctx, renderUpdate(t, true, codes("HOKX", 2)...), Safety{}); err != nil {
		t.Fatalf("publish after the hook was lifted: %v", err)
	}
}

// TestGitConcurrentPublishers races publishers against one branch through smart HTTP,
// each with its own cache and its own tenants: every change must land.
func TestGitConcurrentPublishers(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	bare := bareRepo(t, root, "race.git")
	srv := gitHTTPServer(t, root, "", "")
	url := srv.URL + "/race.git"
	base := codes("BASX", 4)
	if _, err := remoteFor(url, filepath.Join(t.TempDir(), "seed")).Publish(ctx, renderUpdate(t, true, base...), Safety{}); err != nil {
		t.Fatal(err)
	}

	const publishers, rounds = 4, 3
	var wg sync.WaitGroup
	errs := make(chan error, publishers*rounds)
	attempts := make(chan int, publishers*rounds)
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := remoteFor(url, filepath.Join(root, fmt.Sprintf("cache-%d", p)))
			for r := range rounds {
				// Each publisher renders the whole fleet as it sees it: the shared base,
				// plus its own tenants so far. Full updates from different writers must
				// not revert each other.
				specs := append([]tenantSpec{}, base...)
				for k := 0; k <= r; k++ {
					specs = append(specs, tenantSpec{code: fmt.Sprintf("PUBX%c%c", 'A'+p, 'A'+k)})
				}
				res, err := g.Publish(ctx, renderUpdate(t, false, specs[len(base):]...), Safety{})
				if err != nil {
					errs <- err
					return
				}
				attempts <- res.Attempts
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(attempts)
	for err := range errs {
		t.Fatal(err)
	}
	most, total := 0, 0
	for a := range attempts {
		most, total = max(most, a), total+a
	}
	t.Logf("%d publishes, %d push attempts, at most %d for one publish", publishers*rounds, total, most)
	if most > 8 {
		t.Errorf("a publish took %d attempts; retries must stay bounded", most)
	}
	files := treeOf(t, bare, "main")
	for p := range publishers {
		for k := range rounds {
			if _, ok := files[fmt.Sprintf("tenants/pubx%c%c/manifests.yaml", 'a'+p, 'a'+k)]; !ok {
				t.Errorf("tenant PUBX%c%c was lost", 'A'+p, 'A'+k)
			}
		}
	}
	root2 := gitCLI(t, bare, "show", "refs/heads/main:"+render.RootKustomization)
	if n := strings.Count(root2, "- flux/"); n != len(base)+publishers*rounds {
		t.Errorf("root kustomization lists %d tenants, want %d", n, len(base)+publishers*rounds)
	}
	gitCLI(t, bare, "fsck", "--strict")
}

// TestGitFullUpdatesDoNotRevertEachOther: two writers render the whole fleet, each
// changing a different tenant from the same starting point.
func TestGitFullUpdatesDoNotRevertEachOther(t *testing.T) {
	ctx := context.Background()
	bare := bareRepo(t, t.TempDir(), "full.git")
	base := codes("FULX", 3)
	if _, err := remoteFor(bare, filepath.Join(t.TempDir(), "seed")).Publish(ctx, renderUpdate(t, true, base...), Safety{}); err != nil {
		t.Fatal(err)
	}
	a := append([]tenantSpec{}, base...)
	a[0].replicas = 2
	b := append([]tenantSpec{}, base...)
	b[1].replicas = 3
	ga := remoteFor(bare, filepath.Join(t.TempDir(), "a"))
	gb := remoteFor(bare, filepath.Join(t.TempDir(), "b"))
	// B fetches and merges, then A pushes before B does: B's push is rejected and
	// B re-applies its own change on A's head.
	ua, ub := renderUpdate(t, true, a...), renderUpdate(t, true, b...)
	once := sync.Once{}
	gb.beforePush = func() {
		once.Do(func() {
			if _, err := ga.Publish(ctx, ua, Safety{}); err != nil {
				t.Error(err)
			}
		})
	}
	res, err := gb.Publish(ctx, ub, Safety{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 2 {
		t.Errorf("B pushed in %d attempts, want 2 (one rejection)", res.Attempts)
	}
	show := func(code string) string {
		return gitCLI(t, bare, "show", "refs/heads/main:tenants/"+code+"/workloads/manifests.yaml")
	}
	if !strings.Contains(show("fulxaa"), "replicaCount: 2") || !strings.Contains(show("fulxab"), "replicaCount: 3") {
		t.Fatal("one writer's full render reverted the other's change")
	}
}

func TestGitSameTenantRaceKeepsOneWholeVersion(t *testing.T) {
	ctx := context.Background()
	bare := bareRepo(t, t.TempDir(), "same.git")
	var wg sync.WaitGroup
	for i, replicas := range []int{2, 3} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := remoteFor(bare, filepath.Join(t.TempDir(), fmt.Sprint("c", i)))
			if _, err := g.Publish(ctx, renderUpdate(t, false, tenantSpec{code: "SAMEXX", replicas: replicas}), Safety{}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got := gitCLI(t, bare, "show", "refs/heads/main:tenants/samexx/manifests.yaml") + "\n"
	var matched bool
	for _, replicas := range []int{2, 3} {
		files, _ := testRenderer(t).TenantFiles(makeTenant(tenantSpec{code: "SAMEXX", replicas: replicas}))
		matched = matched || got == string(files[2].Data)
	}
	if !matched {
		t.Fatal("the tenant's bundle is neither writer's version: the race corrupted it")
	}
	gitCLI(t, bare, "fsck", "--strict")
}

func TestGitPublishSafety(t *testing.T) {
	ctx := context.Background()
	bare := bareRepo(t, t.TempDir(), "safe.git")
	g := remoteFor(bare, filepath.Join(t.TempDir(), "cache"))
	if _, err := g.Publish(ctx, renderUpdate(t, true, codes("SAFX", 4)...), Safety{}); err != nil {
		t.Fatal(err)
	}
	head := gitCLI(t, bare, "rev-parse", "refs/heads/main")

	_, err := g.Publish(ctx, Update{Tenants: map[string][]render.File{}, Full: true}, Safety{})
	if err == nil || !strings.Contains(err.Error(), "SAFXAA") || !strings.Contains(err.Error(), "--allow-mass-delete") {
		t.Fatalf("empty render: err = %v", err)
	}
	_, err = g.Publish(ctx, renderUpdate(t, true, codes("SAFX", 3)...), Safety{})
	if err == nil || !strings.Contains(err.Error(), "SAFXAD") || !strings.Contains(err.Error(), "not Decommissioned") {
		t.Fatalf("removing an active tenant: err = %v", err)
	}
	if got := gitCLI(t, bare, "rev-parse", "refs/heads/main"); got != head {
		t.Fatal("a refused publish pushed")
	}
	// Decommission first, then remove: accepted.
	specs := codes("SAFX", 4)
	specs[3].lifecycle = "Decommissioned"
	if _, err := g.Publish(ctx, renderUpdate(t, true, specs...), Safety{}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Publish(ctx, renderUpdate(t, true, codes("SAFX", 3)...), Safety{}); err != nil {
		t.Fatalf("removing a decommissioned tenant: %v", err)
	}
	// Mass deletion with the flag goes through.
	if _, err := g.Publish(ctx, Update{Tenants: map[string][]render.File{}, Full: true}, Safety{AllowMassDelete: true}); err == nil {
		t.Fatal("removing active tenants went through with only --allow-mass-delete")
	}
}

func TestLocalDirSink(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "repo")
	var sink Sink = &LocalDir{Dir: dir}
	if _, err := sink.Publish(ctx, renderUpdate(t, true, codes("LOCX", 3)...), Safety{}); err != nil {
		t.Fatal(err)
	}
	// A partial update changes one tenant and keeps the others.
	res, err := sink.Publish(ctx, renderUpdate(t, false, tenantSpec{code: "LOCXAB", replicas: 4}), Safety{})
	if err != nil || !res.Committed || strings.Join(res.Plan.Changed, ",") != "locxab" {
		t.Fatalf("partial update: %v %+v", err, res)
	}
	if n := gitCLI(t, dir, "ls-files"); strings.Count(n, "workloads/manifests.yaml") != 3 {
		t.Fatalf("tenants after a partial update:\n%s", n)
	}
	if st := gitCLI(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("worktree not clean:\n%s", st)
	}
	_, err = sink.Publish(ctx, Update{Tenants: map[string][]render.File{"locxaa": nil}}, Safety{})
	if err == nil || !strings.Contains(err.Error(), "LOCXAA") {
		t.Fatalf("removing an active tenant: %v", err)
	}
}
