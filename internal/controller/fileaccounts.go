package controller

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/natsaccount"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// FileAccounts gives the tenants published from files (no EvaTenant in the cluster) their
// NATS accounts, in an environment with natsAccounts. What asks for one is the NACK
// Account Eva renders in the tenant's foundation (tenant.NATSAccountObject), applied by
// Flux into a namespace whose owner is tenant.FileOwner: the operator mints the account
// for the namespace's own code, with the limits of the tier the object's labels carry,
// and writes the workloads' credentials beside it, as for an EvaTenant. An Account
// anywhere else (another name, a namespace not eva-tenant-<its code>) is refused with an
// event. The operator's finalizer holds the NACK Account: when it is deleted (the file's
// lifecycle Decommissioned, or the file removed and its folder pruned), once NACK's own
// finalizer has gone with its Streams, the account is closed (credentials anyone kept
// are refused from then on) and the Account let go, though no operator ran then.
type FileAccounts struct {
	client.Client
	// Reader reads from the API server: the namespace's owner, before an account is made
	// or closed for it.
	Reader   client.Reader
	Accounts *Accounts
	Catalog  *tenant.Catalog
	Recorder events.EventRecorder
}

// SetupWithManager registers the reconciler for NACK Accounts and tenant namespaces.
func (f *FileAccounts) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("fileaccounts").For(&nackv1beta2.Account{}).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetName(), Name: tenant.NATSAccountObject}}}
		})).Complete(f)
}

// fileAccountFinalizer holds a tenant file's NACK Account until the operator has closed
// the NATS account it asked for: a pruning while no operator runs is seen when one
// starts, and the account is never left open for a tenant that is gone.
const fileAccountFinalizer = "eva.aidonow.com/nats-account"

// Reconcile makes or closes the account of the file tenant whose namespace req names.
func (f *FileAccounts) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	code, ok := codeOfNamespace(req.Namespace)
	if !ok {
		return ctrl.Result{}, nil
	}
	var account nackv1beta2.Account
	err := f.Get(ctx, req.NamespacedName, &account)
	switch {
	case apierrors.IsNotFound(err) && req.Name == tenant.NATSAccountObject:
		// Gone without the finalizer (removed by hand): close what was made for it.
		return ctrl.Result{}, f.close(ctx, code)
	case err != nil:
		return ctrl.Result{}, client.IgnoreNotFound(err)
	case !account.DeletionTimestamp.IsZero():
		return f.release(ctx, code, &account)
	}
	var ns corev1.Namespace
	if err := f.Reader.Get(ctx, types.NamespacedName{Name: req.Namespace}, &ns); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if ns.Annotations[tenant.AnnotationOwnerUID] != tenant.FileOwner || !ns.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // an EvaTenant's (its reconciler makes the account), or going
	}
	if refusal := f.refusal(code, &account); refusal != "" {
		f.Recorder.Eventf(&account, nil, corev1.EventTypeWarning, status.ReasonMessagingDown, "MintAccount", "%s", refusal)
		return ctrl.Result{}, nil
	}
	return f.mint(ctx, code, &account)
}

// refusal says why a NACK Account in the namespace of the tenant of code asks for no
// account: another name, another capsule, no tier of the catalog.
func (f *FileAccounts) refusal(code string, account *nackv1beta2.Account) string {
	switch {
	case account.Name != tenant.NATSAccountObject:
		return fmt.Sprintf("no NATS account is made for a NACK Account named %s: a tenant's is %s", account.Name, tenant.NATSAccountObject)
	case account.Labels[tenant.LabelCapsule] != code:
		return fmt.Sprintf("refused: a NACK Account of capsule %q in namespace %s, which is tenant %s's",
			account.Labels[tenant.LabelCapsule], account.Namespace, code)
	}
	if _, ok := f.Catalog.Tiers[evav1.Tier(account.Labels[tenant.LabelTier])]; !ok {
		return fmt.Sprintf("refused: label %s is %q, no tier of the catalog", tenant.LabelTier, account.Labels[tenant.LabelTier])
	}
	return ""
}

// mint holds the NACK Account (fileAccountFinalizer), makes the account current with
// its tier's limits and writes the workloads' credentials.
func (f *FileAccounts) mint(ctx context.Context, code string, account *nackv1beta2.Account) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(account, fileAccountFinalizer) {
		base := account.DeepCopy()
		controllerutil.AddFinalizer(account, fileAccountFinalizer)
		if err := f.Patch(ctx, account, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("holding NACK Account %s/%s: %w", account.Namespace, account.Name, err)
		}
	}
	limits := natsaccount.LimitsOf(f.Catalog.Tiers[evav1.Tier(account.Labels[tenant.LabelTier])])
	_, _, creds, err := f.Accounts.Ensure(ctx, code, tenant.FileOwner, limits, "")
	if err == nil {
		err = f.Accounts.WriteCreds(ctx, code, creds)
	}
	if err != nil {
		f.Recorder.Eventf(account, nil, corev1.EventTypeWarning, status.ReasonMessagingDown, "MintAccount", "%v", err)
		return ctrl.Result{RequeueAfter: MessagingRetry}, nil
	}
	return ctrl.Result{}, nil
}

// release closes the account of a NACK Account being deleted, once NACK has let it go
// (NACK's finalizer stays while Streams name it, which NACK deletes with its
// credentials), then lets it go too.
func (f *FileAccounts) release(ctx context.Context, code string, account *nackv1beta2.Account) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(account, fileAccountFinalizer) {
		return ctrl.Result{}, nil
	}
	if len(account.Finalizers) > 1 {
		return ctrl.Result{RequeueAfter: WaitDeletion}, nil
	}
	if err := f.close(ctx, code); err != nil {
		f.Recorder.Eventf(account, nil, corev1.EventTypeWarning, status.ReasonMessagingDown, "CloseAccount", "%v", err)
		return ctrl.Result{}, err
	}
	base := account.DeepCopy()
	controllerutil.RemoveFinalizer(account, fileAccountFinalizer)
	return ctrl.Result{}, client.IgnoreNotFound(f.Patch(ctx, account, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})))
}

// close closes the tenant's account if a tenant file's was made (an EvaTenant's is its
// decommission saga's to close).
func (f *FileAccounts) close(ctx context.Context, code string) error {
	file, err := f.Accounts.OwnedByFile(ctx, code)
	if err != nil || !file {
		return err
	}
	return f.Accounts.Close(ctx, code)
}

var capsuleCode = regexp.MustCompile(evav1.CapsuleCodePattern)

// codeOfNamespace is the capsule code of a tenant namespace, eva-tenant-<code>.
func codeOfNamespace(ns string) (string, bool) {
	lower, ok := strings.CutPrefix(ns, "eva-tenant-")
	code := strings.ToUpper(lower)
	return code, ok && tenant.Namespace(code) == ns && capsuleCode.MatchString(code)
}
