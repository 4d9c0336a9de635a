// Package claim records which EvaTenant owns a capsule code. A code names a namespace,
// two JetStream streams and every object of a tenant, so two EvaTenant objects with the
// same code would act on the same objects: the first to claim a code owns it, and every
// other object with that code is refused and never applies, adopts, prunes or deletes.
//
// A claim is a coordination.k8s.io Lease named capsule-<code> in one namespace shared by
// every operator version (the platform's namespace). Creating it is atomic on the API
// server, so two operators (or two workers) racing for a code cannot both win, and it
// survives restarts and blue/green upgrades because it lives in the cluster, not in
// memory. The Lease carries no duration: it is a record, not a lock that expires.
//
// With cells (docs/cells.md), the fleet operator alone writes the claims: it claims a
// code before placing its tenant and releases it once the tenant's cell recorded the
// tenant Decommissioned; the cells' operators only read them (Holder).
//
// A claim outlives its holder only when the holder was deleted without its saga (Eva's
// finalizer removed by hand): the operator then reports the claim as orphaned to the
// next tenant given the code and frees nothing itself, since the old tenant's namespace,
// releases and streams may remain and adopting them is not its call. Removing those and
// then deleting the Lease (kubectl -n <platform namespace> delete lease capsule-<code>)
// frees the code.
package claim

import (
	"context"
	"fmt"
	"strings"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/tenant"
)

// Annotations of a claim: the owner's identity, read back on every reconcile.
const (
	// AnnotationOwnerUID is the UID of the EvaTenant holding the claim.
	AnnotationOwnerUID = tenant.AnnotationOwnerUID
	// AnnotationOwner is the namespace/name of the EvaTenant holding the claim.
	AnnotationOwner = "eva.aidonow.com/owner"
)

// Owner identifies the EvaTenant that holds a code.
type Owner struct {
	Namespace string
	Name      string
	UID       types.UID
}

// String names the owner for messages: namespace/name (uid).
func (o Owner) String() string { return fmt.Sprintf("%s/%s (uid %s)", o.Namespace, o.Name, o.UID) }

// Store reads and writes claims in one namespace.
type Store struct {
	// Client reads claims (a cached client is fine: a miss falls back to Reader) and
	// writes them.
	Client client.Client
	// Reader reads from the API server directly, after a create lost a race and the
	// cache has not seen the winner yet.
	Reader client.Reader
	// Namespace holds the claims; every operator version must use the same one.
	Namespace string
	// Limit, when positive, caps how many codes may be claimed at once (the
	// entitlements' maxTenants): Acquire of a new code past it returns a *FullError.
	// The claims are counted on the API server, one new claim at a time in this
	// process; operators acquiring at the same moment may each take the last place, so
	// the fleet holds at most one more per operator.
	Limit int

	newClaims sync.Mutex
}

// FullError is Acquire refusing a new code: the fleet holds its limit of claims.
type FullError struct{ Claimed, Limit int }

func (e *FullError) Error() string {
	return fmt.Sprintf("the fleet holds %d tenants, the most the environment's entitlements allow (maxTenants %d): a capsule code is claimed only once another is released",
		e.Claimed, e.Limit)
}

// Name returns the Lease name of a code's claim.
func Name(code string) string { return "capsule-" + strings.ToLower(code) }

// Key returns the namespace and name of a code's claim: the Lease to delete by hand
// when its holder was deleted without releasing it (an orphaned claim).
func (s *Store) Key(code string) types.NamespacedName {
	return types.NamespacedName{Namespace: s.Namespace, Name: Name(code)}
}

// Acquire claims code for the owner, or returns the current holder. It returns true
// when owner holds the claim (newly or already).
func (s *Store) Acquire(ctx context.Context, code string, owner Owner) (Owner, bool, error) {
	key := s.Key(code)
	var lease coordinationv1.Lease
	err := s.Client.Get(ctx, key, &lease)
	switch {
	case err == nil:
		holder := ownerOf(&lease)
		return holder, holder.UID == owner.UID, nil
	case !apierrors.IsNotFound(err):
		return Owner{}, false, fmt.Errorf("reading claim %s of capsule code %s: %w", key, code, err)
	}
	if s.Limit > 0 {
		// Counted and created one at a time: workers acquiring at once would each
		// count the same claims.
		s.newClaims.Lock()
		defer s.newClaims.Unlock()
		if err := s.checkLimit(ctx); err != nil {
			return Owner{}, false, err
		}
	}
	lease = coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace, Name: Name(code),
			Labels: map[string]string{tenant.LabelCapsule: code},
			Annotations: map[string]string{
				AnnotationOwnerUID: string(owner.UID),
				AnnotationOwner:    owner.Namespace + "/" + owner.Name,
			},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(owner.Namespace + "/" + owner.Name)},
	}
	err = s.Client.Create(ctx, &lease)
	switch {
	case err == nil:
		return owner, true, nil
	case !apierrors.IsAlreadyExists(err):
		return Owner{}, false, fmt.Errorf("claiming capsule code %s: %w", code, err)
	}
	// Another tenant won the race: read the winner from the API server, the cache may
	// not have it yet.
	if err := s.Reader.Get(ctx, key, &lease); err != nil {
		return Owner{}, false, fmt.Errorf("reading claim %s of capsule code %s: %w", key, code, err)
	}
	holder := ownerOf(&lease)
	return holder, holder.UID == owner.UID, nil
}

// checkLimit returns a *FullError when the fleet holds Limit claims already.
func (s *Store) checkLimit(ctx context.Context) error {
	if s.Limit <= 0 {
		return nil
	}
	var list coordinationv1.LeaseList
	if err := s.Reader.List(ctx, &list, client.InNamespace(s.Namespace), client.HasLabels{tenant.LabelCapsule}); err != nil {
		return fmt.Errorf("counting the claims of namespace %s: %w", s.Namespace, err)
	}
	if n := len(list.Items); n >= s.Limit {
		return &FullError{Claimed: n, Limit: s.Limit}
	}
	return nil
}

// Holder returns the owner of code's claim; found is false when nothing claims it.
func (s *Store) Holder(ctx context.Context, code string) (holder Owner, found bool, err error) {
	var lease coordinationv1.Lease
	if err := s.Client.Get(ctx, s.Key(code), &lease); err != nil {
		if apierrors.IsNotFound(err) {
			return Owner{}, false, nil
		}
		return Owner{}, false, fmt.Errorf("reading claim %s of capsule code %s: %w", s.Key(code), code, err)
	}
	return ownerOf(&lease), true, nil
}

// Release deletes the claim on code if owner holds it; a claim held by another tenant,
// or none at all, is left as it is.
func (s *Store) Release(ctx context.Context, code string, owner Owner) error {
	key := s.Key(code)
	var lease coordinationv1.Lease
	if err := s.Reader.Get(ctx, key, &lease); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ownerOf(&lease).UID != owner.UID {
		return nil
	}
	// The UID precondition deletes exactly the claim read, never one re-created since.
	err := s.Client.Delete(ctx, &lease, client.Preconditions{UID: &lease.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("releasing claim %s of capsule code %s: %w", key, code, err)
	}
	return nil
}

func ownerOf(l *coordinationv1.Lease) Owner {
	ns, name, _ := strings.Cut(l.Annotations[AnnotationOwner], "/")
	return Owner{Namespace: ns, Name: name, UID: types.UID(l.Annotations[AnnotationOwnerUID])}
}
