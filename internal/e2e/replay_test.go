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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testcluster"
)

// assertReplayDecryptsNowhere is the replay of issue 32 on the real kustomize-controller,
// which does not check SOPS' MAC: a writer other than Eva (a compromised publisher, a
// hand edit of the repository) copies tenant from's published Secret file into tenant
// to's workloads, with only its name and namespace changed, and lists it there. Each
// tenant's workloads Kustomization decrypts with that tenant's own key, so to's build
// fails to decrypt it and no Secret of its plaintext appears in to's namespace. With one
// key for every tenant, the copy decrypted and was applied. `evactl validate` refuses
// the same copy before it is published (TestValidateRefusesAnotherTenantsCiphertext).
func assertReplayDecryptsNowhere(ctx context.Context, t *testing.T, repo, from, secret, to string) {
	t.Helper()
	stolen := strings.ToLower(to) + "-stolen"
	commit := plantInRepository(t, repo, func(dir string) error {
		src := filepath.Join(dir, "tenants", strings.ToLower(from), render.WorkloadsDir, render.SecretsDir, secret+".yaml")
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		copied := strings.NewReplacer(secret, stolen, tenant.Namespace(from), tenant.Namespace(to)).Replace(string(data))
		workloads := filepath.Join(dir, "tenants", strings.ToLower(to), render.WorkloadsDir)
		if err := os.WriteFile(filepath.Join(workloads, render.SecretsDir, stolen+".yaml"), []byte(copied), 0o644); err != nil {
			return err
		}
		k, err := os.OpenFile(filepath.Join(workloads, "kustomization.yaml"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer k.Close()
		_, err = fmt.Fprintf(k, "- %s/%s.yaml\n", render.SecretsDir, stolen)
		return err
	})
	requestReconcile(t, "GitRepository", "eva-tenants")

	name := render.WorkloadsName(to)
	poll(t, "Kustomization "+name+" to refuse the copied Secret at "+commit[:12], 3*time.Minute, func() error {
		k := &unstructured.Unstructured{}
		k.SetGroupVersionKind(kustomizationGVK)
		if err := cluster.Client.Get(ctx, types.NamespacedName{Namespace: testcluster.FluxNamespace, Name: name}, k); err != nil {
			return err
		}
		attempted, _, _ := unstructured.NestedString(k.Object, "status", "lastAttemptedRevision")
		c, _ := readyOf(k)
		if !strings.Contains(attempted, commit) || c.Status != "False" {
			return fmt.Errorf("revision %s, Ready %s: %s", attempted, c.Status, c.Message)
		}
		if !strings.Contains(strings.ToLower(c.Message), "decrypt") {
			t.Fatalf("Kustomization %s failed at the copy, but not to decrypt it: %s", name, c.Message)
		}
		return nil
	})
	var s corev1.Secret
	err := cluster.Client.Get(ctx, types.NamespacedName{Namespace: tenant.Namespace(to), Name: stolen}, &s)
	if !apierrors.IsNotFound(err) {
		t.Fatalf("Secret %s/%s, a copy of %s's ciphertext: %v (want it never applied)", tenant.Namespace(to), stolen, from, err)
	}
}

// assertKustomizationReady waits until the Flux Kustomization name is Ready again.
func assertKustomizationReady(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	poll(t, "Kustomization "+name+" to be Ready", 3*time.Minute, func() error {
		return allReady(ctx, kustomizationGVK, 1, client.InNamespace(testcluster.FluxNamespace), client.MatchingFields{"metadata.name": name})
	})
}

// plantInRepository commits what edit writes into a clone of the suite's repository and
// pushes it to main, as a writer other than Eva would, and returns the commit. Other
// scenarios publish to the same repository, so a refused push is rebased and retried.
func plantInRepository(t *testing.T, repo string, edit func(dir string) error) string {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=planter", "GIT_AUTHOR_EMAIL=planter@example.com",
			"GIT_COMMITTER_NAME=planter", "GIT_COMMITTER_EMAIL=planter@example.com")
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := run("clone", "--quiet", "--branch", "main", repo, "."); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	if err := edit(dir); err != nil {
		t.Fatal(err)
	}
	if out, err := run("add", "--all"); err != nil {
		t.Fatalf("git add: %v\n%s", err, out)
	}
	if out, err := run("commit", "--quiet", "--message", "planted by a writer other than Eva"); err != nil {
		t.Fatalf("git commit: %v\n%s", err, out)
	}
	for attempt := 0; ; attempt++ {
		out, err := run("push", "--quiet", "origin", "HEAD:main")
		if err == nil {
			break
		}
		if attempt == 4 {
			t.Fatalf("git push: %v\n%s", err, out)
		}
		if out, err := run("pull", "--quiet", "--rebase", "origin", "main"); err != nil {
			t.Fatalf("git pull --rebase: %v\n%s", err, out)
		}
	}
	out, err := run("rev-parse", "HEAD")
	if err != nil {
		t.Fatalf("git rev-parse: %v\n%s", err, out)
	}
	return out
}
