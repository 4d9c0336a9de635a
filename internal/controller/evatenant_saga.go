package controller

import (
	"context"
	"fmt"
	"slices"

	ctrl "sigs.k8s.io/controller-runtime"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/observe"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/saga"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// decommissionGitOps drives the decommission saga in GitOps mode (stepGitOps), and
// finishes once the tenant is out of the tree and its namespace pruned.
func (r *EvaTenantReconciler) decommissionGitOps(ctx context.Context, s *scope) (ctrl.Result, error) {
	mv := s.tenant.Status.Move
	d := saga.Decision{Action: saga.Finish}
	if mv == nil || mv.From != r.Cell || mv.SourceRemovedAt == nil {
		// Unless the move took the tenant off this cell already (its decommissionStep
		// is Removed): the rest is the target's copy, which finishDecommission waits for.
		var err error
		if d, err = r.stepGitOps(ctx, s, nil); err != nil {
			return ctrl.Result{}, err
		}
	}
	if d.Action == saga.Finish {
		if mv != nil && r.directMessaging() {
			// A move's removal of this cell's copy left the streams (direct messaging).
			if err := r.deleteStreams(ctx, s.tenant); err != nil {
				return ctrl.Result{}, err
			}
		}
		return r.finishDecommission(ctx, s)
	}
	s.waiting(status.ReasonDecommissioning, d.Message)
	return ctrl.Result{RequeueAfter: WaitDeletion}, nil
}

// stepGitOps takes the GitOps saga's next step for s.tenant: it reads what the step
// needs, asks saga.Next what to do, and does it, recording the step published in
// s.tenant's status (decommissionStep, revision, appliedDigest), so a restarted
// operator resumes. c, for a cell's copy in a move, says how it differs from a
// decommission. The decision says what is left to do: Wait
// (its message says for what), Drain, or Finish.
func (r *EvaTenantReconciler) stepGitOps(ctx context.Context, s *scope, c *copyRemoval) (saga.Decision, error) {
	t := s.tenant
	if message, republished, err := r.republishStep(ctx, s); err != nil || republished {
		return saga.Decision{Action: saga.Wait, Message: message}, err
	}
	o, err := r.observeSaga(ctx, s)
	if err != nil {
		return saga.Decision{}, err
	}
	if c != nil {
		o.Moving, o.Drained = c.source, c.drained
		o.DirectMessaging = o.DirectMessaging && !c.keepStreams
	}
	d := saga.Next(o)
	if d.Action != saga.Publish {
		return d, nil
	}
	if d.DeleteStreams {
		// Direct messaging: the streams live in JetStream only, the operator deletes them.
		if err := r.deleteStreams(ctx, t); err != nil {
			s.log.Error(err, "deleting the tenant's streams")
			return saga.Decision{Action: saga.Wait, Message: "deleting the streams in JetStream failed: " + err.Error()}, nil
		}
	}
	if d.Step == evav1.StepStreamsRemoved && c == nil {
		// NACK deletes the Streams Flux prunes with the credentials the workloads hold:
		// they are cut off first, while the Account and the credentials' Secret are
		// there and held. Not later: a Secret written after NACKAccounts let it go would
		// hold the namespace for good.
		if err := r.cutOffWorkloads(ctx, t); err != nil {
			s.log.Error(err, "cutting the tenant's workloads off the bus")
			return saga.Decision{Action: saga.Wait, Message: "cutting the workloads off the bus failed: " + err.Error()}, nil
		}
	}
	if d.Message, err = r.publishStep(s, d.Step); err != nil {
		return saga.Decision{}, err
	}
	d.Action = saga.Wait
	return d, nil
}

// copyRemoval is how removing one cell's copy of a moving tenant differs from a
// decommission: the source takes its traffic first, and the JetStream streams the
// operator manages stay unless the tenant is retired (cells that share one NATS share
// them).
type copyRemoval struct {
	// source: the move's source (traffic first, then the drain); drained: the drain is
	// over.
	source, drained bool
	// keepStreams leaves the streams in JetStream (direct messaging).
	keepStreams bool
}

// observeSaga reads what the saga's next step depends on: always the namespace and the
// delivery objects, and what the step waits on (the Stream objects, the HelmReleases or
// Argo CD's Applications).
func (r *EvaTenantReconciler) observeSaga(ctx context.Context, s *scope) (saga.Observed, error) {
	t := s.tenant
	code := t.Spec.CapsuleCode
	_, submitted := r.GitOps.lastSubmitted(t.UID)
	o := saga.Observed{Step: t.Status.DecommissionStep, Revision: t.Status.Revision, EverPublished: t.Status.Revision != "" || submitted,
		Namespace: tenant.Namespace(code), ArgoCD: r.argoCD(), DirectMessaging: r.directMessaging()}
	if !o.EverPublished && o.Step == "" {
		// Nothing recorded before the first step (the only one EverPublished decides): a
		// process killed between a publish and its record (a move's copy has no record
		// of its own) may have left the tenant's files in the tree.
		empty, _, err := r.GitOps.headHolds(ctx, code, publish.EmptyTenantDigest)
		if err != nil {
			return o, err
		}
		o.EverPublished = !empty
	}
	if err := r.observeDelivery(ctx, s); err != nil {
		return o, err
	}
	o.Foundation, o.Workloads = observe.SagaDeliveries(s.observed.GitOps)
	if err := observe.SagaObjects(ctx, r, code, &o); err != nil {
		return o, err
	}
	if o.ArgoCD && (o.Step == evav1.StepReleasesRemoved || o.Step == evav1.StepRemoved) {
		var err error
		if o.Applications, err = r.applicationsOf(ctx, code); err != nil {
			return o, err
		}
		o.WorkloadApplications = slices.DeleteFunc(slices.Clone(o.Applications), func(name string) bool { return name == render.FoundationName(code) })
	}
	return o, nil
}

// publishStep submits the tenant's files of a saga step and reports what the saga now
// waits for; once the publish is done, the step is recorded with its revision.
func (r *EvaTenantReconciler) publishStep(s *scope, step evav1.DecommissionStep) (string, error) {
	t := s.tenant
	files, err := r.Renderer.StepFiles(s.rendered, step)
	if err != nil {
		return "", err
	}
	digest := publish.TenantDigest(files)
	done, rev, err := r.GitOps.publish(t, stepDigest(step, digest), files)
	if !done {
		return fmt.Sprintf("publishing step %s", step), nil
	}
	if err != nil {
		s.log.Error(err, "publishing a decommission step", "step", step)
		return "", err
	}
	t.Status.Revision, t.Status.AppliedDigest, t.Status.DecommissionStep = rev, digest, step
	return fmt.Sprintf("published step %s; waiting for it to be applied", step), nil
}

// republishStep publishes the saga's recorded step again when the branch or tag does
// not hold its files (another writer, a force-push), or when the status does not record
// them (an operator before content checks left appliedDigest empty): the step is
// waited for by content, so it must be there. Nothing is done while this process has a
// publish of the tenant under way or not yet recorded. It reports whether it published.
func (r *EvaTenantReconciler) republishStep(ctx context.Context, s *scope) (string, bool, error) {
	t := s.tenant
	step := t.Status.DecommissionStep
	if step == "" {
		return "", false, nil
	}
	files, err := r.Renderer.StepFiles(s.rendered, step)
	if err != nil {
		return "", false, err
	}
	digest := publish.TenantDigest(files)
	if !r.GitOps.settled(t.UID, stepDigest(step, digest), t.Status.Revision) {
		return "", false, nil
	}
	if t.Status.AppliedDigest == digest {
		if held, err := r.stillPublished(ctx, s, digest); err != nil || held {
			return "", false, err
		}
	}
	r.GitOps.resubmit(t.UID)
	message, err := r.publishStep(s, step)
	return message, true, err
}
