package controller

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/entitlement"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/natsaccount"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// NACKAccounts looks after the NACK Account Eva renders in every tenant's foundation
// (tenant.NATSAccountObject), in an environment with natsAccounts.
//
// For the tenants published from files (no EvaTenant in the cluster) it is what asks for
// their NATS accounts: in a namespace whose owner is tenant.FileOwner, the operator mints
// the account for the namespace's own code, with the limits of the tier the object's
// labels carry, and writes the workloads' credentials beside it, as for an EvaTenant. An
// Account anywhere else (another name, a namespace not eva-tenant-<its code>) is refused
// with an event.
//
// For every tenant it orders the teardown: NACK deletes a tenant's streams with the
// credentials the Account names, so the operator holds the credentials' Secret
// (natsCredsFinalizer) and the Account (nackAccountFinalizer) until NACK has let the
// Account go, its Streams gone; then it closes a tenant file's account (an EvaTenant's
// is its saga's to close) and lets both go, though no operator ran when they were
// deleted. Without this the namespace's deletion took the Secret at once, and NACK could
// delete no stream: the namespace stayed Terminating.
type NACKAccounts struct {
	client.Client
	// Reader reads from the API server: the namespace's owner, before an account is made
	// or closed for it.
	Reader   client.Reader
	Accounts *Accounts
	Catalog  *tenant.Catalog
	// Entitlements are the environment's (nil: every tier): a tenant file's account
	// gets only a tier they give its code.
	Entitlements *entitlement.Rules
	Recorder     events.EventRecorder
}

// SetupWithManager registers the reconciler for NACK Accounts.
func (f *NACKAccounts) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("nackaccounts").For(&nackv1beta2.Account{}).Complete(f)
}

// nackAccountFinalizer holds a tenant's NACK Account until the operator has let its
// credentials go and, for a tenant file, closed the NATS account it asked for: a
// pruning while no operator runs is seen when one starts, and the account is never left
// open for a tenant that is gone.
const nackAccountFinalizer = "eva.aidonow.com/nats-account"

// Reconcile holds, or lets go, the NACK Account req names, and makes a tenant file's
// account. The finalizer makes every deletion seen: one that took the Account without
// it (removed by hand) is not looked for.
func (f *NACKAccounts) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	code, ok := codeOfNamespace(req.Namespace)
	if !ok {
		return ctrl.Result{}, nil
	}
	var account nackv1beta2.Account
	if err := f.Get(ctx, req.NamespacedName, &account); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !account.DeletionTimestamp.IsZero() {
		return f.release(ctx, code, &account)
	}
	var ns corev1.Namespace
	if err := f.Reader.Get(ctx, types.NamespacedName{Name: req.Namespace}, &ns); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ns.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // going: its Account's deletion follows
	}
	if refusal := f.refusal(code, &account); refusal != "" {
		f.Recorder.Eventf(&account, nil, corev1.EventTypeWarning, status.ReasonMessagingDown, "MintAccount", "%s", refusal)
		return ctrl.Result{}, nil
	}
	if err := f.hold(ctx, &account); err != nil {
		return ctrl.Result{}, err
	}
	if ns.Annotations[tenant.AnnotationOwnerUID] != tenant.FileOwner {
		return ctrl.Result{}, nil // an EvaTenant's: its reconciler makes the account
	}
	if refusal := f.tierRefusal(code, &account); refusal != "" {
		f.Recorder.Eventf(&account, nil, corev1.EventTypeWarning, status.ReasonMessagingDown, "MintAccount", "%s", refusal)
		return ctrl.Result{}, nil
	}
	return f.mint(ctx, code, &account)
}

// hold puts nackAccountFinalizer on the Account.
func (f *NACKAccounts) hold(ctx context.Context, account *nackv1beta2.Account) error {
	if controllerutil.ContainsFinalizer(account, nackAccountFinalizer) {
		return nil
	}
	base := account.DeepCopy()
	controllerutil.AddFinalizer(account, nackAccountFinalizer)
	if err := f.Patch(ctx, account, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("holding NACK Account %s/%s: %w", account.Namespace, account.Name, err)
	}
	return nil
}

// refusal says why a NACK Account in the namespace of the tenant of code asks for no
// account: another name, another capsule.
func (f *NACKAccounts) refusal(code string, account *nackv1beta2.Account) string {
	switch {
	case account.Name != tenant.NATSAccountObject:
		return fmt.Sprintf("no NATS account is made for a NACK Account named %s: a tenant's is %s", account.Name, tenant.NATSAccountObject)
	case account.Labels[tenant.LabelCapsule] != code:
		return fmt.Sprintf("refused: a NACK Account of capsule %q in namespace %s, which is tenant %s's",
			account.Labels[tenant.LabelCapsule], account.Namespace, code)
	}
	return ""
}

// tierRefusal says why a tenant file's NACK Account gets no account of the tier its
// label names: no tier of the catalog, or one the entitlements do not give the code,
// checked as evactl checks the file (Rules.TierAllowed).
func (f *NACKAccounts) tierRefusal(code string, account *nackv1beta2.Account) string {
	tier := evav1.Tier(account.Labels[tenant.LabelTier])
	if _, ok := f.Catalog.Tiers[tier]; !ok {
		return fmt.Sprintf("refused: label %s is %q, no tier of the catalog", tenant.LabelTier, tier)
	}
	if !f.Entitlements.TierAllowed(code, tier) {
		// What evactl refuses of the file: its published objects say no more than it may.
		return fmt.Sprintf("refused: label %s is %s, a tier the environment's entitlements do not give tenant %s",
			tenant.LabelTier, tier, code)
	}
	return ""
}

// mint makes a tenant file's account current with its tier's limits and writes the
// workloads' credentials.
func (f *NACKAccounts) mint(ctx context.Context, code string, account *nackv1beta2.Account) (ctrl.Result, error) {
	limits := natsaccount.LimitsOf(f.Catalog.Tiers[evav1.Tier(account.Labels[tenant.LabelTier])])
	_, creds, err := f.Accounts.Ensure(ctx, code, tenant.FileOwner, limits, "", false)
	if err == nil {
		err = f.Accounts.WriteCreds(ctx, code, creds)
	}
	if err != nil {
		f.Recorder.Eventf(account, nil, corev1.EventTypeWarning, status.ReasonMessagingDown, "MintAccount", "%v", err)
		return ctrl.Result{RequeueAfter: MessagingRetry}, nil
	}
	return ctrl.Result{}, nil
}

// release lets the credentials and the Account being deleted go once NACK has let the
// Account go (NACK's finalizer stays while Streams name it, which NACK deletes with the
// credentials), closing a tenant file's account first.
func (f *NACKAccounts) release(ctx context.Context, code string, account *nackv1beta2.Account) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(account, nackAccountFinalizer) {
		return ctrl.Result{}, nil
	}
	if err := f.cutOffWorkloads(ctx, code, account); err != nil {
		f.Recorder.Eventf(account, nil, corev1.EventTypeWarning, status.ReasonMessagingDown, "CutOffWorkloads", "%v", err)
		return ctrl.Result{RequeueAfter: MessagingRetry}, nil
	}
	if len(account.Finalizers) > 1 {
		return ctrl.Result{RequeueAfter: WaitDeletion}, nil
	}
	// NACK's finalizer may not be on yet (its controllers race the deletion): a Stream
	// still in the namespace is deleted with these credentials, so the account stays
	// open until none is left.
	var streams nackv1beta2.StreamList
	if err := f.List(ctx, &streams, client.InNamespace(account.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the Streams of %s: %w", account.Namespace, err)
	}
	if len(streams.Items) > 0 {
		return ctrl.Result{RequeueAfter: WaitDeletion}, nil
	}
	if err := f.close(ctx, code); err != nil {
		f.Recorder.Eventf(account, nil, corev1.EventTypeWarning, status.ReasonMessagingDown, "CloseAccount", "%v", err)
		return ctrl.Result{}, err
	}
	if err := f.Accounts.ReleaseCreds(ctx, code); err != nil {
		return ctrl.Result{}, err
	}
	base := account.DeepCopy()
	controllerutil.RemoveFinalizer(account, nackAccountFinalizer)
	return ctrl.Result{}, client.IgnoreNotFound(f.Patch(ctx, account, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})))
}

// cutOffWorkloads cuts a tenant file's workloads off the bus once its Account is being
// deleted, before NACK deletes its streams with the Account's credentials
// (Accounts.CutOffWorkloads; an EvaTenant's are cut by its decommission saga). The
// Secret is written in a namespace that is going, as the Account is: it is there still,
// held by natsCredsFinalizer.
func (f *NACKAccounts) cutOffWorkloads(ctx context.Context, code string, account *nackv1beta2.Account) error {
	tier, ok := f.Catalog.Tiers[evav1.Tier(account.Labels[tenant.LabelTier])]
	if !ok {
		return nil // never minted with the label (tierRefusal): nothing is signed with no limits
	}
	creds, err := f.Accounts.CutOffWorkloads(ctx, code, tenant.FileOwner, natsaccount.LimitsOf(tier))
	if err != nil || creds == nil {
		return err
	}
	return f.Accounts.WriteCreds(ctx, code, creds)
}

// close closes the tenant's account if a tenant file's was made (an EvaTenant's is its
// decommission saga's to close).
func (f *NACKAccounts) close(ctx context.Context, code string) error {
	return f.Accounts.Close(ctx, code, tenant.FileOwner)
}

var capsuleCode = regexp.MustCompile(evav1.CapsuleCodePattern)

// codeOfNamespace is the capsule code of a tenant namespace, eva-tenant-<code>.
func codeOfNamespace(ns string) (string, bool) {
	lower, ok := strings.CutPrefix(ns, "eva-tenant-")
	code := strings.ToUpper(lower)
	return code, ok && tenant.Namespace(code) == ns && capsuleCode.MatchString(code)
}
