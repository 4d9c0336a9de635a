package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testcluster"
	"github.com/aidonow/eva/internal/testenv"
)

// commitRE matches a git commit, alone or as Flux writes it (main@sha1:<commit>).
var commitRE = regexp.MustCompile(`^(main@sha1:)?[0-9a-f]{40}$`)

// TestOperatorGitOpsModeEveryTier runs the operator binary in GitOps mode: it commits
// one tenant of each tier to its own fleet repository and asks Flux to fetch it (the
// source's own interval is 10 minutes), the real Flux controllers fetch,
// apply and install them, and the operator reads Flux's Kustomizations back: every
// tenant reaches Active and `kubectl wait --for=condition=Ready` succeeds. Deleting them
// publishes the decommissioned bundles, then removes the tenants from the tree, and Flux
// prunes the namespaces before the finalizers go.
func TestOperatorGitOpsModeEveryTier(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	const source = "eva-operator"
	ns, operator := startGitOpsOperator(t, "e2e-gitops", source)

	// The Customer tenant's database password comes encrypted in its spec.secrets: the
	// operator publishes it as it is, and kustomize-controller decrypts it.
	password := hostileSecret()
	tenants := provisionEveryTier(t, ns, "GIT", 8*time.Minute, withDatabasePassword(t, password))
	var codes []string
	provisionedFirst := 0
	for _, tn := range tenants {
		got, err := current(ctx, tn)
		if err != nil {
			t.Fatal(err)
		}
		if revision, _, _ := unstructured.NestedString(got.Object, "status", "revision"); !commitRE.MatchString(revision) {
			t.Errorf("%s: status.revision %q is not a published commit", tn.GetName(), revision)
		}
		// Provisioned is the foundation applied, not "everything healthy": it turns True
		// while the releases are still installing. Never after ModulesDeployed; in the
		// same second when the operator, on a loaded machine, looked only once both were
		// ready (it did, once in a full suite), so strictly before for at least one tier.
		provisioned, modules := firstTrue(got, evav1.ConditionProvisioned), firstTrue(got, evav1.ConditionModulesDeployed)
		if provisioned.IsZero() || modules.Before(provisioned) {
			t.Errorf("%s: Provisioned first True at %v, ModulesDeployed at %v: want Provisioned first", codeOf(got), provisioned, modules)
		} else if provisioned.Before(modules) {
			provisionedFirst++
			t.Logf("%s: Provisioned %v before ModulesDeployed", codeOf(got), modules.Sub(provisioned))
		}
		// ModulesDeployed reports helm-controller's verdict: never before the last release
		// was Ready. How soon after is logged, not asserted: under a loaded machine the gap
		// is the API server's latency, not a property of the operator.
		if lastReady := lastReleaseReady(t, codeOf(got)); lastReady.IsZero() {
			t.Errorf("%s: no HelmRelease is Ready", codeOf(got))
		} else if modules.Before(lastReady) {
			t.Errorf("%s: ModulesDeployed at %v, before the last HelmRelease became Ready at %v", codeOf(got), modules, lastReady)
		} else {
			t.Logf("%s: ModulesDeployed %v after the last HelmRelease became Ready", codeOf(got), modules.Sub(lastReady))
		}
		codes = append(codes, codeOf(got))
	}
	if provisionedFirst == 0 {
		t.Errorf("no tenant was Provisioned before its modules were deployed: Provisioned waits for the releases")
	}
	assertSecretMounted(ctx, t, "GITCUS", "crm", "crm-database", map[string]string{"password": password}, "")
	for _, tn := range tenants {
		got, err := current(ctx, tn)
		if err != nil {
			t.Fatal(err)
		}
		status, _ := json.Marshal(got.Object["status"])
		if strings.Contains(string(status), password) {
			t.Errorf("%s: the password is in plaintext in the tenant's status", tn.GetName())
		}
	}
	scanForPlaintext(t, filepath.Join(gitRoot, source+".git"), map[string]string{"operator output": operator.Output()}, password)

	order := watchSagaOrder(true, codes...)
	deleteAndWaitGone(t, 5*time.Minute, tenants...)
	order.check(t)

	// The operator asked Flux to fetch its publishes, and source-controller handles the
	// last request. The last publish (the tenants leaving the tree) may be requested just
	// as the test gets here, so this waits for it to be handled.
	poll(t, "source-controller to handle the operator's last fetch request", 2*time.Minute, func() error {
		src := &unstructured.Unstructured{}
		src.SetAPIVersion("source.toolkit.fluxcd.io/v1")
		src.SetKind("GitRepository")
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: testcluster.FluxNamespace, Name: source}, src); err != nil {
			return err
		}
		requested := src.GetAnnotations()["reconcile.fluxcd.io/requestedAt"]
		handled, _, _ := unstructured.NestedString(src.Object, "status", "lastHandledReconcileAt")
		if requested == "" || handled != requested {
			return fmt.Errorf("GitRepository %s: requestedAt %q, lastHandledReconcileAt %q: the operator's fetch requests were not made or not handled", source, requested, handled)
		}
		return nil
	})
}

// firstTrue is when a tenant's condition first turned True (status.firstTrue), zero if
// it never did.
func firstTrue(u *unstructured.Unstructured, condition string) time.Time {
	at, _, _ := unstructured.NestedString(u.Object, "status", "firstTrue", condition)
	parsed, _ := time.Parse(time.RFC3339, at)
	return parsed
}

// lastReleaseReady is when the last of a tenant's HelmReleases became Ready.
func lastReleaseReady(t *testing.T, code string) time.Time {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(helmReleaseGVK.GroupVersion().WithKind("HelmReleaseList"))
	if err := cluster.Client.List(context.Background(), list, client.InNamespace(tenant.Namespace(code))); err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for _, hr := range list.Items {
		raw, _, _ := unstructured.NestedSlice(hr.Object, "status", "conditions")
		for _, item := range raw {
			m, _ := item.(map[string]any)
			if m["type"] == "Ready" && m["status"] == "True" {
				at, _ := time.Parse(time.RFC3339, fmt.Sprint(m["lastTransitionTime"]))
				if at.After(last) {
					last = at
				}
			}
		}
	}
	return last
}

// startGitOpsOperator gives a scenario its own fleet repository (source.git), the Flux
// source and root Kustomization of that name reading it, a tenant namespace ns, and an
// operator publishing the tenants of ns there. The source fetches only every 10 minutes:
// tenants reach Active within a test's minutes only because the operator asks Flux to
// fetch each publish at once.
func startGitOpsOperator(t *testing.T, ns, source string) (string, *testenv.Process) {
	t.Helper()
	url := newGitRepository(t, source+".git")
	if err := bootstrapSource(context.Background(), "GitRepository", source, url, "main", "10m"); err != nil {
		t.Fatal(err)
	}
	tenantNamespace(t, ns)
	op := startOperator(t, ns, "--overlays="+environment(t, gitOpsSource("GitRepository", source)),
		"--publish=git", "--git-url="+url, "--git-branch=main", "--git-cache="+t.TempDir())
	return ns, op
}
