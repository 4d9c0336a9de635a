package airgap

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/testenv"
)

// TestQuickstartDryRun runs hack/quickstart.sh --dry-run against a real API server: it
// succeeds, and nothing is created.
func TestQuickstartDryRun(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Fatal("kubectl is needed for the quickstart test")
	}
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			t.Logf("stopping envtest: %v", err)
		}
	}()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(testenv.RepoRoot(), "hack", "quickstart.sh")
	run := func(args ...string) (string, error) {
		out, err := exec.Command("bash", append([]string{script, "--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		return string(out), err
	}
	// Without Flux, the script stops and says so.
	if out, err := run("--dry-run", "--capsule-code", "QUICKS"); err == nil || !strings.Contains(out, "Flux is not installed") {
		t.Errorf("cluster without Flux: %v\n%s", err, out)
	}
	// The cluster as Eva needs it: Flux installed (its namespace is what base/ binds in).
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flux-system"}}); err != nil {
		t.Fatal(err)
	}
	out, err := run("--dry-run", "--capsule-code", "QUICKS", "--wave", "2")
	if err != nil || !strings.Contains(out, "nothing was changed") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	ctx := context.Background()
	if err := env.Client.Get(ctx, types.NamespacedName{Name: "eva-system"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("the dry run created the eva-system namespace: %v", err)
	}
	var tenants evav1.EvaTenantList
	if err := env.Client.List(ctx, &tenants); err != nil || len(tenants.Items) != 0 {
		t.Errorf("the dry run created tenants: %v %d", err, len(tenants.Items))
	}
	// Bad input fails clearly.
	if out, err := run("--dry-run", "--capsule-code", "quick"); err == nil || !strings.Contains(out, "six upper-case letters") {
		t.Errorf("bad code: %v\n%s", err, out)
	}
	// The air-gap path refuses placeholder digests.
	if out, err := run("--dry-run", "--air-gap"); err == nil || !strings.Contains(out, "not pinned by digest") {
		t.Errorf("air gap with placeholders: %v\n%s", err, out)
	}
}
