package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/messaging"
	"github.com/aidonow/eva/internal/natsaccount"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// directMessaging: the operator creates the tenants' streams in JetStream itself, in a
// shared account (Streams) or in each tenant's own (Accounts with DirectAccounts).
func (r *EvaTenantReconciler) directMessaging() bool {
	return r.Streams != nil || r.Accounts != nil && r.DirectAccounts
}

// streamsOf returns the manager of the tenant's streams: the shared one, or a user of
// the tenant's own account (nil when that account was never made: it holds nothing),
// and the function to call once done with it. An account of the code made for another
// owner (a tenant file beside an EvaTenant of its code) is not the tenant's to reach.
func (r *EvaTenantReconciler) streamsOf(ctx context.Context, t *evav1.EvaTenant) (StreamManager, func(), error) {
	if r.Accounts == nil {
		return r.Streams, func() {}, nil
	}
	c, done, err := r.Accounts.StreamsOf(ctx, t.Spec.CapsuleCode, tenant.Owner(string(t.UID)))
	if err != nil || c == nil {
		return nil, done, err
	}
	return c, done, nil
}

// ensureStreams creates (or updates) the tenant's two streams in JetStream directly and
// records their real existence for the Provisioned condition. NATS being unreachable
// is not an error of the reconcile: the condition says MessagingUnavailable and the
// tenant is looked at again shortly. With Accounts, the tenant's own account is made
// current first, and its workloads' credentials written; a missing piece (the
// platform's Secrets, a server refusing the account) is said the same way, and nothing
// falls back to a shared account.
func (r *EvaTenantReconciler) ensureStreams(ctx context.Context, s *scope) {
	t := s.tenant
	if r.Accounts != nil {
		if err := r.ensureAccount(ctx, s); err != nil {
			s.log.Error(err, "ensuring the tenant's NATS account")
			s.observed.MessagingError = err.Error()
			return
		}
	}
	streams, done, err := r.streamsOf(ctx, t)
	defer done()
	if err == nil && streams == nil {
		err = fmt.Errorf("%w of %s: made, yet its key Secret is not found", errAccount, t.Spec.CapsuleCode)
	}
	if err != nil {
		s.log.Error(err, "reaching the tenant's streams")
		s.observed.MessagingError = err.Error()
		return
	}
	limits := r.Renderer.Catalog.Tiers[t.Spec.Tier].Streams
	for _, spec := range messaging.TenantStreams(t.Spec.CapsuleCode, limits) {
		state := status.StreamState{Name: "JetStream/" + spec.Name}
		if _, err := streams.Ensure(ctx, spec); err != nil {
			s.log.Error(err, "ensuring stream", "stream", spec.Name)
			if errors.Is(err, messaging.ErrUnavailable) {
				s.observed.MessagingError = "NATS JetStream unreachable while ensuring " + spec.Name + ": " + err.Error()
			} else {
				s.observed.MessagingError = "could not ensure stream " + spec.Name + ": " + err.Error()
			}
		} else if ok, err := streams.Exists(ctx, spec.Name); err != nil {
			s.log.Error(err, "looking up stream", "stream", spec.Name)
			s.observed.MessagingError = "could not look up stream " + spec.Name + ": " + err.Error()
		} else {
			state.Found = ok
			state.Ready = readyCondition(ok)
		}
		s.observed.Streams = append(s.observed.Streams, state)
	}
}

// deleteStreams removes the tenant's streams from JetStream (saga step 1, direct mode).
// With an account per tenant its workloads' user is revoked first: their connections,
// up to the tier's, would keep the operator out (Accounts.RevokeWorkloads).
func (r *EvaTenantReconciler) deleteStreams(ctx context.Context, t *evav1.EvaTenant) error {
	code := t.Spec.CapsuleCode
	if r.Accounts != nil {
		limits := natsaccount.LimitsOf(r.Renderer.Catalog.Tiers[t.Spec.Tier])
		if err := r.Accounts.RevokeWorkloads(ctx, code, tenant.Owner(string(t.UID)), limits); err != nil {
			return err
		}
	}
	streams, done, err := r.streamsOf(ctx, t)
	defer done()
	if err != nil || streams == nil {
		return err
	}
	var errs []error
	for _, name := range []string{tenant.EventsStream(code), tenant.CommandsStream(code)} {
		if err := streams.Delete(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cutOffWorkloads cuts the tenant's workloads off the bus as its decommission begins
// (NACK mode with natsAccounts: direct mode revokes them in deleteStreams), so that
// NACK, which deletes its streams with the tenant's credentials' Secret, finds a
// connection free: a new user is written there and the old one revoked
// (Accounts.CutOffWorkloads). A namespace already gone, or terminating without the
// Secret, has no NACK Account left to use it: nothing to write.
func (r *EvaTenantReconciler) cutOffWorkloads(ctx context.Context, t *evav1.EvaTenant) error {
	if r.Accounts == nil || r.DirectAccounts {
		return nil
	}
	code := t.Spec.CapsuleCode
	limits := natsaccount.LimitsOf(r.Renderer.Catalog.Tiers[t.Spec.Tier])
	creds, err := r.Accounts.CutOffWorkloads(ctx, code, tenant.Owner(string(t.UID)), limits)
	if err != nil || creds == nil {
		return err
	}
	err = r.Accounts.WriteCreds(ctx, code, creds)
	if apierrors.IsNotFound(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return nil
	}
	return err
}

func readyCondition(ok bool) *metav1.Condition {
	if ok {
		return &metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Exists", Message: "stream exists in JetStream"}
	}
	return &metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Missing", Message: "stream not found in JetStream"}
}

// accountPhase makes the tenant's NATS account current and writes its workloads'
// credentials when NACK makes its streams (an environment with natsAccounts, messaging
// nack): in GitOps mode the tenant's namespace may not be applied yet, which is said
// and looked at again shortly, like NATS being away.
func (r *EvaTenantReconciler) accountPhase(ctx context.Context, s *scope) (ctrl.Result, error) {
	if r.awaitsPublish(s) {
		return ctrl.Result{}, nil
	}
	if err := r.ensureAccount(ctx, s); err != nil {
		s.log.Error(err, "ensuring the tenant's NATS account")
		s.observed.MessagingError = err.Error()
		return ctrl.Result{RequeueAfter: MessagingRetry}, nil
	}
	return ctrl.Result{}, nil
}

// awaitsPublish reports whether the tenant's account and streams wait for its files to
// be published once (GitOps mode). Until then, the code's folder, namespace and
// account may be another owner's: a tenant file's, which holds no claim in the
// cluster, refuses this tenant's publish (publish.ErrOtherOwner), and would otherwise
// see its account made with this tenant's tier, its credentials written by it, and its
// account closed by this tenant's decommission.
func (r *EvaTenantReconciler) awaitsPublish(s *scope) bool {
	return r.GitOps != nil && s.tenant.Status.Revision == "" && s.observed.Applied.Revision == ""
}

// movePhase moves what the tenant's streams still hold in the shared account
// (MoveFrom) into their namesakes in the tenant's own account, once those exist (made
// by the operator in direct mode, by NACK otherwise), and deletes the emptied shared
// streams. A move cut short goes on at the next reconcile where it stopped.
func (r *EvaTenantReconciler) movePhase(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.observed.MessagingError != "" || r.awaitsPublish(s) {
		return ctrl.Result{}, nil // the account is not there yet: said already, or waits
	}
	code := s.tenant.Spec.CapsuleCode
	own, done, err := r.Accounts.StreamsOf(ctx, code, tenant.Owner(string(s.tenant.UID)))
	defer done()
	for _, name := range []string{tenant.EventsStream(code), tenant.CommandsStream(code)} {
		found := false
		if err == nil && own != nil {
			found, err = own.Exists(ctx, name)
		}
		if err == nil && !found {
			return ctrl.Result{RequeueAfter: MessagingRetry}, nil // not made in the tenant's account yet
		}
		moved := 0
		if err == nil {
			moved, err = r.MoveFrom.Move(ctx, own, name)
		}
		if err != nil {
			s.log.Error(err, "moving a stream out of the shared account", "stream", name)
			s.observed.MessagingError = fmt.Sprintf("moving stream %s out of the shared NATS account: %v", name, err)
			return ctrl.Result{RequeueAfter: MessagingRetry}, nil
		}
		if moved > 0 {
			s.event(corev1.EventTypeNormal, status.EventStreamsMoved,
				"Moved %d message(s) of %s from the shared NATS account into the tenant's own", moved, name)
		}
	}
	return ctrl.Result{}, nil
}

// ensureAccount makes the tenant's NATS account current (its tier's limits), records
// its public key in the status, and writes its workloads' credentials into its
// namespace (tenant.NATSCredsSecret, never in git, OCI, events or status).
func (r *EvaTenantReconciler) ensureAccount(ctx context.Context, s *scope) error {
	t := s.tenant
	code := t.Spec.CapsuleCode
	limits := natsaccount.LimitsOf(r.Renderer.Catalog.Tiers[t.Spec.Tier])
	pub, creds, err := r.Accounts.Ensure(ctx, code, tenant.Owner(string(t.UID)), limits,
		t.Annotations[tenant.AnnotationRotateNATSCredentials], t.Status.NATSAccount == "")
	if pub != "" {
		t.Status.NATSAccount = pub
	}
	if err != nil {
		return err
	}
	return r.Accounts.WriteCreds(ctx, code, creds)
}
