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
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/natsaccount"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// +kubebuilder:rbac:groups="",resources=secrets,verbs=list,namespace=eva-system

// FileAccounts gives the tenants published from files (no EvaTenant in the cluster) their
// NATS accounts, in an environment with natsAccounts. What asks for one is the NACK
// Account Eva renders in the tenant's foundation (tenant.NATSAccountObject), applied by
// Flux into a namespace whose owner is tenant.FileOwner: the operator mints the account
// for the namespace's own code, with the limits of the tier the object's labels carry,
// and writes the workloads' credentials beside it, as for an EvaTenant. An Account
// anywhere else (another name, a namespace not eva-tenant-<its code>) is refused with an
// event. When the NACK Account goes (the file's lifecycle Decommissioned, or the file
// removed and its folder pruned; NACK's finalizer keeps it until its Streams are gone),
// the account is closed: credentials anyone kept are refused from then on.
type FileAccounts struct {
	client.Client
	// Reader reads from the API server: the namespace's owner, before an account is made
	// or closed for it.
	Reader   client.Reader
	Accounts *Accounts
	Catalog  *tenant.Catalog
	Recorder events.EventRecorder
}

// SetupWithManager registers the reconciler for NACK Accounts and tenant namespaces, and
// the look at every file tenant's account when the manager starts (Start).
func (f *FileAccounts) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.Add(f); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("fileaccounts").For(&nackv1beta2.Account{}).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetName(), Name: tenant.NATSAccountObject}}}
		})).Complete(f)
}

// Reconcile makes or closes the account of the file tenant whose namespace req names.
func (f *FileAccounts) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	code, ok := codeOfNamespace(req.Namespace)
	if !ok {
		return ctrl.Result{}, nil
	}
	var ns corev1.Namespace
	err := f.Reader.Get(ctx, types.NamespacedName{Name: req.Namespace}, &ns)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("reading namespace %s: %w", req.Namespace, err)
	}
	live := err == nil && ns.DeletionTimestamp.IsZero()
	if live && ns.Annotations[tenant.AnnotationOwnerUID] != tenant.FileOwner {
		return ctrl.Result{}, nil // an EvaTenant's: its reconciler makes the account
	}
	var account nackv1beta2.Account
	err = f.Get(ctx, req.NamespacedName, &account)
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return ctrl.Result{}, err
	case req.Name != tenant.NATSAccountObject:
		if err == nil && live {
			f.Recorder.Eventf(&account, nil, corev1.EventTypeWarning, status.ReasonMessagingDown, "MintAccount",
				"no NATS account is made for a NACK Account named %s: a tenant's is %s", req.Name, tenant.NATSAccountObject)
		}
		return ctrl.Result{}, nil
	case err != nil || !account.DeletionTimestamp.IsZero() || !live:
		return ctrl.Result{}, f.close(ctx, code)
	}
	if got := account.Labels[tenant.LabelCapsule]; got != code {
		f.Recorder.Eventf(&account, nil, corev1.EventTypeWarning, status.ReasonMessagingDown, "MintAccount",
			"refused: a NACK Account of capsule %q in namespace %s, which is tenant %s's", got, req.Namespace, code)
		return ctrl.Result{}, nil
	}
	tier, ok := f.Catalog.Tiers[evav1.Tier(account.Labels[tenant.LabelTier])]
	if !ok {
		f.Recorder.Eventf(&account, nil, corev1.EventTypeWarning, status.ReasonMessagingDown, "MintAccount",
			"refused: label %s is %q, no tier of the catalog", tenant.LabelTier, account.Labels[tenant.LabelTier])
		return ctrl.Result{}, nil
	}
	_, _, creds, err := f.Accounts.Ensure(ctx, code, tenant.FileOwner, natsaccount.LimitsOf(tier), "")
	if err == nil {
		err = f.Accounts.WriteCreds(ctx, code, creds)
	}
	if err != nil {
		f.Recorder.Eventf(&account, nil, corev1.EventTypeWarning, status.ReasonMessagingDown, "MintAccount", "%v", err)
		return ctrl.Result{RequeueAfter: MessagingRetry}, nil
	}
	return ctrl.Result{}, nil
}

// Start looks, once the manager runs (and holds the leadership), at every account made
// for a tenant file: one whose namespace or NACK Account went while no operator ran is
// closed then, since no event will come for it.
func (f *FileAccounts) Start(ctx context.Context) error {
	var keys corev1.SecretList
	log := ctrl.Log.WithName("fileaccounts")
	if err := f.Reader.List(ctx, &keys, client.InNamespace(f.Accounts.Namespace), client.HasLabels{tenant.LabelCapsule}); err != nil {
		log.Error(err, "listing the NATS account keys: an account of a tenant file removed while no operator ran stays open until its namespace is made and removed again")
		return nil
	}
	for _, key := range keys.Items {
		code := key.Labels[tenant.LabelCapsule]
		if key.Name != accountKeySecret(code) || key.Annotations[tenant.AnnotationOwnerUID] != tenant.FileOwner {
			continue
		}
		req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: tenant.Namespace(code), Name: tenant.NATSAccountObject}}
		if _, err := f.Reconcile(ctx, req); err != nil {
			log.Error(err, "looking at the NATS account of a tenant file", "capsule", code)
		}
	}
	return nil
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
