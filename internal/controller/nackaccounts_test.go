package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/entitlement"
	"github.com/aidonow/eva/internal/messaging"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/natsaccount"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// startNACKAccounts starts an operator whose NACKAccounts mint the accounts of tenant
// files on n; with consumerSubjects, for an environment with natsConsumer.
func startNACKAccounts(t *testing.T, n *testenv.OperatorNATS, signer, system string, consumerSubjects ...string) *operator {
	t.Helper()
	return startOperatorWith(t, "", func(r *EvaTenantReconciler, mgr ctrl.Manager) {
		accounts := &Accounts{Reader: mgr.GetAPIReader(), Client: mgr.GetClient(), Namespace: claimsNamespace,
			SignerSecret: signer, SystemSecret: system, Config: messaging.Config{URL: n.URL, Timeout: 2 * time.Second},
			HoldCreds: true, ConsumerSubjects: consumerSubjects}
		// Platform is given to no one: a file labelling its Account so gets no account.
		files := &NACKAccounts{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Accounts: accounts,
			Catalog: r.Renderer.Catalog, Recorder: mgr.GetEventRecorder("eva-operator"),
			Entitlements: &entitlement.Rules{Tiers: []evav1.Tier{evav1.TierStarter, evav1.TierCustomer, evav1.TierEnterprise}}}
		if err := files.SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	})
}

// applyFileFoundation applies, as Flux would from a published tree, the Namespace and
// the NACK Account of a tenant file of code (no EvaTenant: owner tenant.FileOwner),
// rendered for an environment with natsAccounts; edit changes them first.
func applyFileFoundation(t *testing.T, code string, edit func(ns, account *unstructured.Unstructured)) {
	t.Helper()
	applyFileObjects(t, code, edit, "Namespace", "Account")
}

// applyFileObjects applies the objects of the kinds named (in that order) of a tenant
// file's bundle, as applyFileFoundation.
func applyFileObjects(t *testing.T, code string, edit func(ns, account *unstructured.Unstructured), kinds ...string) {
	t.Helper()
	r := testRenderer(t)
	r.Env.Settings.NATSAccounts = true
	tn := fenceTenant(code)
	tn.Namespace = ""
	b, err := r.Bundle(tn)
	if err != nil {
		t.Fatal(err)
	}
	var ns, account *unstructured.Unstructured
	for _, u := range b.Unstructured() {
		switch u.GetKind() {
		case "Namespace":
			ns = u
		case "Account":
			account = u
		}
	}
	if edit != nil {
		edit(ns, account)
	}
	for _, kind := range kinds {
		for _, u := range b.Unstructured() {
			if u.GetKind() != kind {
				continue
			}
			if kind == "Namespace" {
				u = ns
			} else if kind == "Account" {
				u = account
			}
			if err := k8s.Create(context.Background(), u); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestTenantFilePrunedWholeClosesItsAccount: a tenant file removed, Flux prunes its
// folder whole and the namespace controller deletes everything in the namespace at once,
// the credentials' Secret with the Streams. NACK deletes a stream with the credentials
// its Account names then, so the operator holds the Secret until NACK has let the
// Account go: the streams are deleted from the tenant's account, the account is closed,
// and nothing is left held. The tenant's workloads held every connection its tier
// allows: cut off (a new user written for NACK, the old one revoked), they keep NACK
// out no longer. Seen failing without the cut: the Streams kept NACK's finalizer.
func TestTenantFilePrunedWholeClosesItsAccount(t *testing.T) {
	n := testenv.StartNATSOperator(t, t.TempDir())
	signer, system := platformNATSSecrets(t, n, "file-prune")
	startNACKAccounts(t, n, signer, system)
	startStandIn(t, withNATSAccounts(n.URL))
	ctx := context.Background()
	const code = "FILEPR"
	applyFileObjects(t, code, nil, "Namespace", "Account", "Stream")
	var creds []byte
	eventually(t, waitFor, "the tenant file's streams made in its account", func() error {
		if creds = fileCreds(ctx, code); creds == nil {
			return errNot("credentials written")
		}
		nc, err := dialCreds(n.URL, creds)
		if err != nil {
			return err
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		if _, err := js.Stream(ctx, tenant.EventsStream(code)); err != nil {
			return err
		}
		return nil
	})
	held := holdEveryConnection(t, n.URL, creds, evav1.TierStarter)
	// What the namespace controller does: every object of the namespace deleted at once.
	ns := tenant.Namespace(code)
	for _, obj := range []client.Object{&corev1.Secret{}, &nackv1beta2.Stream{}, &nackv1beta2.Account{}} {
		if err := k8s.DeleteAllOf(ctx, obj, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, waitFor, "the account closed and nothing of the tenant held", func() error {
		if err := refused(n.URL, creds); err != nil {
			return err
		}
		for _, list := range []client.ObjectList{&corev1.SecretList{}, &nackv1beta2.StreamList{}, &nackv1beta2.AccountList{}} {
			if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
				return err
			}
			if items, _ := apimeta.ExtractList(list); len(items) > 0 {
				return fmt.Errorf("%d %T left in %s", len(items), items[0], ns)
			}
		}
		return nil
	})
	cutOff(t, held)
}

// TestTenantFilesGetTheirAccounts: a tenant file has no EvaTenant; the NACK Account of
// its published foundation asks for its NATS account. The operator mints it and writes
// the credentials beside it; a NACK Account in a namespace that is not its capsule's, or
// in an EvaTenant's namespace, gets none. Pruned from the tree, the NACK Account's going
// closes the account; pruned while no operator runs, the operator's finalizer holds the
// Account until one starts and closes it.
func TestTenantFilesGetTheirAccounts(t *testing.T) {
	n := testenv.StartNATSOperator(t, t.TempDir())
	signer, system := platformNATSSecrets(t, n, "file-accounts")
	op := startNACKAccounts(t, n, signer, system)
	startStandIn(t)
	ctx := context.Background()
	applyFileFoundation(t, "FILEAA", nil)
	applyFileFoundation(t, "FILEAB", nil)
	// FILEAC's namespace holds an Account claiming FILEAA's capsule; FILEAD's is an
	// EvaTenant's namespace.
	applyFileFoundation(t, "FILEAC", func(_, account *unstructured.Unstructured) {
		labels := account.GetLabels()
		labels[tenant.LabelCapsule] = "FILEAA"
		account.SetLabels(labels)
	})
	applyFileFoundation(t, "FILEAD", func(ns, _ *unstructured.Unstructured) {
		ns.SetAnnotations(map[string]string{tenant.AnnotationOwnerUID: "5f0c2e8a-0000-4000-8000-000000000001"})
	})
	// FILEAE's Account names a tier the entitlements give no one (a tree evactl would
	// have refused, applied all the same). Seen minted before NACKAccounts read them.
	applyFileFoundation(t, "FILEAE", func(_, account *unstructured.Unstructured) {
		labels := account.GetLabels()
		labels[tenant.LabelTier] = string(evav1.TierPlatform)
		account.SetLabels(labels)
	})
	var aa, ab []byte
	eventually(t, waitFor, "the tenant files' credentials written", func() error {
		aa, ab = fileCreds(ctx, "FILEAA"), fileCreds(ctx, "FILEAB")
		if aa == nil || ab == nil {
			return errNot("written")
		}
		return nil
	})
	for _, creds := range [][]byte{aa, ab} {
		nc, err := dialCreds(n.URL, creds)
		if err != nil {
			t.Fatalf("a tenant file's credentials: %v", err)
		}
		nc.Close()
	}
	time.Sleep(2 * time.Second) // what would have been written by now for the other two
	for _, code := range []string{"FILEAC", "FILEAD", "FILEAE"} {
		if fileCreds(ctx, code) != nil {
			t.Errorf("%s got NATS credentials from a NACK Account that is not its tenant file's, or names a tier not its own", code)
		}
	}

	// Pruned while the operator runs.
	deleteNACKAccount(t, "FILEAA")
	eventually(t, waitFor, "FILEAA's credentials refused", func() error { return refused(n.URL, aa) })
	// Refused already once its workloads are cut off; closed once its Account is let go.
	eventually(t, waitFor, "FILEAA's account closed", func() error {
		var key corev1.Secret
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: claimsNamespace, Name: accountKeySecret("FILEAA")}, &key); !apierrors.IsNotFound(err) {
			return errNot("closed")
		}
		return nil
	})
	// Pruned while no operator runs: the operator's finalizer holds the NACK Account,
	// and the account is closed when one starts.
	op.stop()
	deleteNACKAccount(t, "FILEAB")
	held := &unstructured.Unstructured{}
	held.SetAPIVersion("jetstream.nats.io/v1beta2")
	held.SetKind("Account")
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: tenant.Namespace("FILEAB"), Name: tenant.NATSAccountObject}, held); err != nil {
		t.Fatalf("FILEAB's NACK Account while no operator runs: %v", err)
	}
	startNACKAccounts(t, n, signer, system)
	eventually(t, waitFor, "FILEAB's credentials refused", func() error { return refused(n.URL, ab) })
	eventually(t, waitFor, "FILEAB's NACK Account let go", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(held), held); !apierrors.IsNotFound(err) {
			return errNot("gone")
		}
		return nil
	})
	for _, code := range []string{"FILEAA", "FILEAB"} {
		var key corev1.Secret
		err := k8s.Get(ctx, types.NamespacedName{Namespace: claimsNamespace, Name: accountKeySecret(code)}, &key)
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s's account key after its close: %v", code, err)
		}
	}
}

func fileCreds(ctx context.Context, code string) []byte {
	var s corev1.Secret
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: tenant.Namespace(code), Name: tenant.NATSCredsSecret(code)}, &s); err != nil {
		return nil
	}
	return s.Data[tenant.NATSCredsKey]
}

func deleteNACKAccount(t *testing.T, code string) {
	t.Helper()
	account := &unstructured.Unstructured{}
	account.SetAPIVersion("jetstream.nats.io/v1beta2")
	account.SetKind("Account")
	account.SetNamespace(tenant.Namespace(code))
	account.SetName(tenant.NATSAccountObject)
	if err := k8s.Delete(context.Background(), account); err != nil {
		t.Fatal(err)
	}
}

func refused(url string, creds []byte) error {
	if nc, err := dialCreds(url, creds); err == nil {
		nc.Close()
		return errNot("refused")
	}
	return nil
}

// TestAnEvaTenantCannotTakeATenantFilesAccount: an EvaTenant of a tenant file's code
// (tenant files hold no claim in the cluster) neither pushes its limits onto the file's
// account nor closes it when it is decommissioned; the file's own close does.
func TestAnEvaTenantCannotTakeATenantFilesAccount(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATSOperator(t, t.TempDir())
	signer, system := platformNATSSecrets(t, n, "owners")
	accounts := &Accounts{Reader: k8s, Client: k8s, Namespace: claimsNamespace, SignerSecret: signer, SystemSecret: system,
		Config: messaging.Config{URL: n.URL, Timeout: 2 * time.Second}}
	const code, intruder = "TAKENA", "5f0c2e8a-0000-4000-8000-000000000002"
	starter := natsaccount.LimitsOf(tenant.DefaultCatalog().Tiers[evav1.TierStarter])
	platform := natsaccount.LimitsOf(tenant.DefaultCatalog().Tiers[evav1.TierPlatform])
	_, creds, err := accounts.Ensure(ctx, code, tenant.FileOwner, starter, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := accounts.Ensure(ctx, code, intruder, platform, "", true); err == nil || !strings.Contains(err.Error(), "made for another owner") {
		t.Errorf("an EvaTenant's Ensure of a tenant file's account: %v, want a refusal", err)
	}
	if open, err := accounts.Open(ctx, code, intruder); open || err != nil {
		t.Errorf("Open for the EvaTenant: %v, %v; want false", open, err)
	}
	// Nor may it reach the file's streams (its saga would delete them).
	streams, done, err := accounts.StreamsOf(ctx, code, intruder)
	done()
	if streams != nil || err != nil {
		t.Errorf("StreamsOf for the EvaTenant: %v, %v; want none", streams, err)
	}
	if err := accounts.Close(ctx, code, intruder); err != nil {
		t.Fatal(err)
	}
	if err := refused(n.URL, creds); err == nil {
		t.Error("the EvaTenant's decommission closed the tenant file's account")
	}
	if err := accounts.Close(ctx, code, tenant.FileOwner); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitFor, "the file's close refuses its credentials", func() error { return refused(n.URL, creds) })
}
