package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	git "github.com/go-git/go-git/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/tenant"
)

func gitShow(t testing.TB, bare string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", bare}, args...)...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// playKustomizeController applies the tree at the head of the branch the way Flux
// would: each tenant's Flux Kustomization and its bundle are applied, its status says
// which commit was applied, and tenants gone from the tree lose their namespace.
func playKustomizeController(t testing.TB, ctx context.Context, bare string, applyBundles bool) {
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() {
		last := ""
		for ctx.Err() == nil {
			time.Sleep(300 * time.Millisecond)
			head := gitShow(t, bare, "rev-parse", "refs/heads/main")
			if head == "" || head == last {
				continue
			}
			if err := applyTree(ctx, bare, head, applyBundles); err == nil {
				last = head
			}
		}
	}()
}

func applyTree(ctx context.Context, bare, head string, applyBundles bool) error {
	out, err := exec.Command("git", "-C", bare, "ls-tree", "-r", "--name-only", head).Output()
	if err != nil {
		return err
	}
	inTree := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		dir, ok := strings.CutPrefix(p, "flux/")
		if !ok {
			continue
		}
		dir = strings.TrimSuffix(dir, ".yaml")
		inTree[dir] = true
		docs := []string{p}
		if applyBundles {
			docs = append(docs, "tenants/"+dir+"/manifests.yaml")
		}
		for _, doc := range docs {
			data, err := exec.Command("git", "-C", bare, "show", head+":"+doc).Output()
			if err != nil {
				return err
			}
			dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
			for {
				u := &unstructured.Unstructured{}
				if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					return err
				}
				if len(u.Object) == 0 {
					continue
				}
				if err := k8s.Patch(ctx, u, client.Apply, client.FieldOwner("kustomize-controller"), client.ForceOwnership); err != nil {
					return err
				}
			}
		}
		var ks kustomizev1.Kustomization
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: "flux-system", Name: tenant.Namespace(strings.ToUpper(dir))}, &ks); err != nil {
			return err
		}
		ks.Status.LastAppliedRevision = "main@sha1:" + head
		apimeta.SetStatusCondition(&ks.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue,
			Reason: "ReconciliationSucceeded", Message: "Applied revision: main@sha1:" + head})
		if err := k8s.Status().Update(ctx, &ks); err != nil {
			return err
		}
	}
	// Pruning: a tenant gone from the tree loses its Kustomization and namespace.
	var list kustomizev1.KustomizationList
	if err := k8s.List(ctx, &list, client.InNamespace("flux-system")); err != nil {
		return err
	}
	for i := range list.Items {
		ks := &list.Items[i]
		code := ks.Labels[tenant.LabelCapsule]
		if code == "" || inTree[strings.ToLower(code)] {
			continue
		}
		_ = k8s.Delete(ctx, ks)
		_ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant.Namespace(code)}})
	}
	return nil
}

func gitOpsOperator(t *testing.T, bare string, window time.Duration) *publish.Batcher {
	t.Helper()
	ensureFluxNamespace(t)
	sink := &publish.GitRemote{URL: bare, Branch: "main", CacheDir: filepath.Join(t.TempDir(), "cache")}
	batcher := &publish.Batcher{Sink: sink, Window: window}
	// Each reconcile waits for its batch: the batch holds at most as many tenants as run
	// at once, so GitOps mode runs more reconciles in parallel.
	operatorConcurrency = 16
	defer func() { operatorConcurrency = 4 }()
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

func TestGitOpsModeWaitsForFlux(t *testing.T) {
	ctx := context.Background()
	bare := newBare(t)
	gitOpsOperator(t, bare, 200*time.Millisecond)
	ns := newTestNamespace(t)
	tn := newTenant(ns, "GITOPS", evav1.TierStarter)
	createTenant(t, tn)

	// Published, but Flux has not applied it: not Provisioned.
	var rev string
	eventually(t, waitFor, "revision recorded", func() error {
		got := getTenant(t, tn)
		if rev = got.Status.Revision; rev == "" {
			return errNot("revision")
		}
		return nil
	})
	if head := gitShow(t, bare, "rev-parse", "refs/heads/main"); head != rev {
		t.Fatalf("status revision %s, branch head %s", rev, head)
	}
	consistently(t, "not provisioned before Flux applied", func() error {
		if c := condition(getTenant(t, tn), evav1.ConditionProvisioned); c.Status == "True" {
			return fmt.Errorf("Provisioned before Flux applied anything")
		}
		return nil
	})

	// Flux applies the tree; the rest of the stand-ins make the tenant ready.
	playKustomizeController(t, ctx, bare, true)
	playFlux(t, tn, starterModules)
	got := waitPhase(t, tn, evav1.PhaseActive)
	if c := condition(got, evav1.ConditionProvisioned); !strings.Contains(c.Message, rev) {
		t.Errorf("Provisioned message %q does not name the revision", c.Message)
	}

	// Decommission removes the tenant from the tree and waits for Flux to prune it.
	if err := k8s.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*waitFor, "tenant removed from the tree and deleted", func() error {
		if exec.Command("git", "-C", bare, "cat-file", "-e", "refs/heads/main:tenants/gitops/manifests.yaml").Run() == nil {
			return errNot("removed from the tree")
		}
		var cur evav1.EvaTenant
		err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: tn.Name}, &cur)
		if !apierrors.IsNotFound(err) {
			return errNot("tenant deleted: " + condition(&cur, evav1.ConditionReady).Message)
		}
		return nil
	})
	log := gitShow(t, bare, "log", "--format=%s%n%b", "refs/heads/main")
	if !strings.Contains(log, "Removed: GITOPS") {
		t.Errorf("no commit removing the tenant:\n%s", log)
	}
}

func TestGitOpsBatchesCommits(t *testing.T) {
	bare := newBare(t)
	gitOpsOperator(t, bare, 500*time.Millisecond)
	ns := newTestNamespace(t)
	const n = 200
	var tenants []*evav1.EvaTenant
	for i := range n {
		tn := newTenant(ns, fmt.Sprintf("GB%c%c%c%c", 'A'+i/17576%26, 'A'+i/676%26, 'A'+i/26%26, 'A'+i%26), evav1.TierStarter)
		createTenant(t, tn)
		tenants = append(tenants, tn)
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
	if got := strings.Count(files, "/manifests.yaml"); got != n {
		t.Fatalf("%d tenants in the tree, want %d", got, n)
	}
	var count int
	fmt.Sscan(commits, &count)
	t.Logf("%d tenants applied together were published in %d commits", n, count)
	if count > n/4 {
		t.Errorf("%d commits for %d tenants: not batched", count, n)
	}
}
