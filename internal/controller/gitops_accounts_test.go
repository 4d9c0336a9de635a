package controller

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/messaging"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// TestARefusedEvaTenantMintsNoAccount: in GitOps mode, an EvaTenant created with the
// code of a tenant file (tenant files hold no claim in the cluster) has its publish
// refused, the folder being the file's; nor may it make the NATS account of that code
// or write credentials into the file tenant's namespace, which would let its spec.tier
// set the file tenant's limits and its decommission close them. Seen failing before
// the account phase waited for a publish: "the refused EvaTenant made the key Secret
// eva-nats-account-filaaa". Both ways an operator makes accounts: for NACK (the account
// phase) and in direct mode (the streams phase; seen failing without its wait the same
// way, for FILAAB).
func TestARefusedEvaTenantMintsNoAccount(t *testing.T) {
	t.Run("nack", func(t *testing.T) { refusedEvaTenantMintsNoAccount(t, "FILAAA", false) })
	t.Run("direct", func(t *testing.T) { refusedEvaTenantMintsNoAccount(t, "FILAAB", true) })
}

func refusedEvaTenantMintsNoAccount(t *testing.T, code string, direct bool) {
	bare := newBare(t)
	publishFileFolder(t, bare, code)
	ctx := context.Background()
	// The file tenant's namespace, as Flux applied it from the folder.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant.Namespace(code),
		Annotations: map[string]string{tenant.AnnotationOwnerUID: tenant.FileOwner}}}
	if err := k8s.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	n := testenv.StartNATSOperator(t, t.TempDir())
	signer, system := platformNATSSecrets(t, n, "refused-"+strings.ToLower(code))
	ensureFluxNamespace(t)
	sink := &publish.GitRemote{URL: bare, Branch: "main", CacheDir: filepath.Join(t.TempDir(), "cache")}
	startOperatorWith(t, "", func(r *EvaTenantReconciler, mgr ctrl.Manager) {
		r.GitOps = &GitOps{Batcher: &publish.Batcher{Sink: sink, Window: 50 * time.Millisecond}, Revisions: sink}
		r.Renderer.Env.Settings.NATSAccounts = true
		r.Accounts = &Accounts{Reader: mgr.GetAPIReader(), Client: mgr.GetClient(), Namespace: claimsNamespace,
			SignerSecret: signer, SystemSecret: system, Config: messaging.Config{URL: n.URL, Timeout: 2 * time.Second}}
		r.DirectAccounts = direct
	})
	intruder := newTenant(newTestNamespace(t), code, evav1.TierPlatform)
	createTenant(t, intruder)
	eventually(t, waitFor, "the publish refused", func() error {
		got := getTenant(t, intruder)
		for _, c := range got.Status.Conditions {
			if strings.Contains(c.Message, "another owner's") {
				return nil
			}
		}
		return fmt.Errorf("conditions %v", got.Status.Conditions)
	})
	// A few more reconciles: the refusal is retried.
	time.Sleep(2 * time.Second)
	var key corev1.Secret
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: claimsNamespace, Name: accountKeySecret(code)}, &key); !apierrors.IsNotFound(err) {
		t.Errorf("the refused EvaTenant made the key Secret %s (%v)", accountKeySecret(code), err)
	}
	var creds corev1.Secret
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: tenant.Namespace(code), Name: tenant.NATSCredsSecret(code)}, &creds); !apierrors.IsNotFound(err) {
		t.Errorf("the refused EvaTenant wrote %s into the tenant file's namespace (%v)", tenant.NATSCredsSecret(code), err)
	}
	if got := getTenant(t, intruder); got.Status.NATSAccount != "" {
		t.Errorf("the refused EvaTenant records the account %s", got.Status.NATSAccount)
	}
}

// publishFileFolder commits, to the repository's main branch, a tenant folder of code
// as a tenant file publishes it: its foundation's Namespace owned by tenant.FileOwner.
func publishFileFolder(t *testing.T, bare, code string) {
	t.Helper()
	work := filepath.Join(t.TempDir(), "work")
	runGit(t, filepath.Dir(work), "init", "-q", "--initial-branch", "main", work)
	foundation := path.Join(render.TenantsDir, render.DirName(code), render.ManifestsFile)
	if err := os.MkdirAll(filepath.Join(work, filepath.Dir(foundation)), 0o755); err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  annotations:\n    %s: %s\n",
		tenant.Namespace(code), tenant.AnnotationOwnerUID, tenant.FileOwner)
	if err := os.WriteFile(filepath.Join(work, foundation), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, work, "add", ".")
	runGit(t, work, "commit", "-q", "-m", "tenant file "+code)
	runGit(t, work, "push", "-q", bare, "main")
}
