package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// GitOps configures GitOps mode: tenants are published to git (or OCI) for Flux to
// apply, instead of being applied by the operator.
type GitOps struct {
	Batcher *publish.Batcher
	// MinInterval is the least time between two publishes of one tenant's changes: a
	// change arriving sooner waits, and the changes meanwhile coalesce into one publish.
	// A tenant changing without end (a patch loop) then costs the shared repository one
	// commit per interval, not one per batch window. Zero publishes every change.
	MinInterval time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Revisions tells whether an applied revision includes a published one.
	Revisions interface {
		Contains(ctx context.Context, applied, published string) (bool, error)
	}

	// A reconcile submits its tenant's files and returns; the batch's outcome waits in
	// publications until the tenant's next reconcile (woken through wake) collects it.
	mu           sync.Mutex
	publications map[types.UID]*publication
	// submitted is each tenant's last submission, kept when it failed (a failed
	// publication is dropped from publications so that it is submitted again), so the
	// publish interval holds across failures too.
	submitted map[types.UID]submission
	wakeOnce  sync.Once
	wake      chan event.GenericEvent
}

// submission is when a tenant's files of a digest were last submitted.
type submission struct {
	digest string
	at     time.Time
}

// publication is the last publish this process submitted for a tenant.
type publication struct {
	digest   string
	done     bool
	revision string
	err      error
}

// wakeups is the channel a finished publish wakes its tenant through (a controller
// source).
func (g *GitOps) wakeups() chan event.GenericEvent {
	g.wakeOnce.Do(func() { g.wake = make(chan event.GenericEvent, 1024) })
	return g.wake
}

// publish submits the tenant's files (digest names them) to the next batch unless the
// same files are already under way, and reports the outcome once that batch was
// published: done false means not yet, and the tenant is reconciled again when it is.
// A failed outcome is handed out once (the next call submits again); a successful one
// stays, as the record of what was last published for the tenant (lastSubmitted).
func (g *GitOps) publish(t *evav1.EvaTenant, digest string, files []render.File) (done bool, revision string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p := g.publications[t.UID]; p != nil && p.digest == digest {
		switch {
		case !p.done:
			return false, "", nil
		case p.err != nil:
			delete(g.publications, t.UID)
		}
		return true, p.revision, p.err
	}
	if g.publications == nil {
		g.publications = map[types.UID]*publication{}
	}
	p := &publication{digest: digest}
	g.publications[t.UID] = p
	if g.submitted == nil {
		g.submitted = map[types.UID]submission{}
	}
	g.submitted[t.UID] = submission{digest: digest, at: g.now()}
	who := &evav1.EvaTenant{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Name}}
	wake := g.wakeups()
	// A folder published before owners were recorded is this tenant's to take only if it
	// has published before (its status, which only the operator writes, says so).
	adopt := t.Status.Revision != ""
	g.Batcher.Submit(render.DirName(t.Spec.CapsuleCode), files, adopt, func(revision string, err error) {
		g.mu.Lock()
		p.done, p.revision, p.err = true, revision, err
		g.mu.Unlock()
		select {
		case wake <- event.GenericEvent{Object: who}:
		default: // never hold up the publisher; the tenant's periodic requeue covers it
		}
	})
	return false, "", nil
}

// holdBack returns how long a change of the tenant (files of digest) must wait before
// it is published: the rest of MinInterval since this process last submitted another
// digest for it, or zero.
func (g *GitOps) holdBack(uid types.UID, digest string) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	last, ok := g.submitted[uid]
	if g.MinInterval <= 0 || !ok || last.digest == digest {
		return 0 // a retry of the same files waits for the reconcile's backoff only
	}
	return max(last.at.Add(g.MinInterval).Sub(g.now()), 0)
}

func (g *GitOps) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// lastSubmitted returns the digest this process last submitted for the tenant, if any:
// when it differs from what the tenant's status records as published, the tree may hold
// those other files (a spec changed back, a lifecycle flipped mid-saga).
func (g *GitOps) lastSubmitted(uid types.UID) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p := g.publications[uid]; p != nil {
		return p.digest, true
	}
	return "", false
}

// forget drops a decommissioned tenant's record.
func (g *GitOps) forget(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.publications, uid)
	delete(g.submitted, uid)
}

// sagaDigestPrefix marks the digests of decommission steps among a tenant's submissions.
const sagaDigestPrefix = "saga/"

func filesDigest(files []render.File) string {
	h := sha256.New()
	for _, f := range files {
		h.Write([]byte(f.Path))
		h.Write([]byte{0})
		h.Write(f.Data)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// publishTenant publishes the tenant's files (through the batcher, so tenants changing
// together share commits) unless what is published is already current. It does not wait
// for the batch: until the publish is done, no revision is observed.
func (r *EvaTenantReconciler) publishTenant(s *scope) error {
	t := s.tenant
	// The bundle renderPhase rendered: one render per reconcile.
	files, err := r.Renderer.FilesOf(s.rendered, s.bundle, render.TeardownNone)
	if err != nil {
		return err
	}
	digest := filesDigest(files)
	if s.tenant.Status.AppliedDigest == digest && s.tenant.Status.Revision != "" {
		if last, ok := r.GitOps.lastSubmitted(t.UID); !ok || last == digest {
			s.observed.Applied.Revision = s.tenant.Status.Revision
			return nil
		}
	}
	if wait := r.GitOps.holdBack(t.UID, digest); wait > 0 {
		// Coalesced: the reconcile after the wait publishes whatever the spec is then.
		s.publishWait = wait
		if r.Metrics != nil {
			r.Metrics.PublishThrottled.WithLabelValues(t.Spec.CapsuleCode).Inc()
		}
		return nil
	}
	done, rev, err := r.GitOps.publish(t, digest, files)
	if !done {
		return nil // not published yet: Provisioned waits for the revision
	}
	if err != nil {
		s.log.Error(err, "publishing tenant")
		s.observed.Applied.Error = "publishing the tenant failed: see operator logs"
		if errors.Is(err, publish.ErrOtherOwner) {
			// The refusal names this tenant's code only, and what it can do.
			s.observed.Applied.Error = err.Error()
		}
		return err
	}
	if s.tenant.Status.AppliedDigest != digest {
		s.event(corev1.EventTypeNormal, status.EventModuleDeployStarted, "Published revision %s", rev)
	}
	s.tenant.Status.Revision, s.tenant.Status.AppliedDigest, s.tenant.Status.DecommissionStep = rev, digest, ""
	s.observed.Applied.Revision = rev
	return nil
}

// observeDelivery reads what the GitOps tool applied of the tenant: its two Flux
// Kustomizations, or its foundation and workloads Argo CD Applications.
func (r *EvaTenantReconciler) observeDelivery(ctx context.Context, s *scope) error {
	return r.applier().observeDelivery(ctx, s)
}

// observeKustomizations reads the tenant's two Flux Kustomizations and whether each
// applied the published revision (or a later one).
func (r *EvaTenantReconciler) observeKustomizations(ctx context.Context, s *scope) error {
	code := s.tenant.Spec.CapsuleCode
	g := &status.GitOpsState{}
	for _, k := range []struct {
		name  string
		state *status.DeliveryState
	}{{render.FoundationName(code), &g.Foundation}, {render.WorkloadsName(code), &g.Workloads}} {
		key := types.NamespacedName{Namespace: r.Renderer.Env.Settings.FluxNamespace, Name: k.name}
		var ks kustomizev1.Kustomization
		found, err := r.get(ctx, key, &ks)
		if err != nil {
			return err
		}
		*k.state = status.DeliveryState{Kind: kustomizev1.KustomizationKind, Name: key.String(), Found: found}
		if found {
			k.state.Ready = apimeta.FindStatusCondition(ks.Status.Conditions, "Ready")
			k.state.LastAppliedRevision = ks.Status.LastAppliedRevision
			k.state.Applied, k.state.RevisionError = r.applied(ctx, s, ks.Status.LastAppliedRevision, s.tenant.Status.Revision)
		}
	}
	s.observed.GitOps = g
	return nil
}

// applied reports whether Flux's revision ("main@sha1:<commit>", "<tag>@sha256:<digest>")
// includes the published one. When that cannot be told (the published history could not
// be read: an expired token, an unreachable remote), it says why, and logs it: the
// tenant's condition names it rather than waiting for the Kustomization forever.
func (r *EvaTenantReconciler) applied(ctx context.Context, s *scope, fluxRevision, published string) (bool, string) {
	if fluxRevision == "" || published == "" {
		return false, ""
	}
	applied := fluxRevision
	if i := strings.LastIndex(fluxRevision, ":"); i >= 0 {
		applied = fluxRevision[i+1:]
	}
	published = strings.TrimPrefix(published, "sha256:")
	if applied == published {
		return true, ""
	}
	ok, err := r.GitOps.Revisions.Contains(ctx, applied, published)
	if err != nil {
		s.log.Error(err, "reading whether the applied revision includes the published one", "applied", applied, "published", published)
		return false, err.Error()
	}
	return ok, ""
}

// decommissionGitOps is the saga in GitOps mode, in pure-cluster mode's order, each
// step a publish that Flux applies (and prunes) before the next is published:
//  1. StreamsRemoved: the tree without streams and alert rules; wait until the
//     foundation applied it and the Stream objects are gone (NACK deletes the streams);
//  2. ReleasesRemoved: the workloads out too; wait until the workloads applied it and
//     helm-controller uninstalled every release (as the deployer account the
//     foundation still holds);
//  3. NamespaceOnly: the Decommissioned bundle, the namespace alone (the publisher
//     refuses to remove a tenant whose published bundle is not that); wait until the
//     foundation applied it;
//  4. Removed: the tenant out of the tree; wait until Flux pruned the namespace.
//
// status.decommissionStep records the step published, so a restarted operator resumes.
func (r *EvaTenantReconciler) decommissionGitOps(ctx context.Context, s *scope) (ctrl.Result, error) {
	t := s.tenant
	code := t.Spec.CapsuleCode
	ns := tenant.Namespace(code)
	now := metav1.NewTime(r.now())
	wait := func(msg string, err error) (ctrl.Result, error) {
		if err != nil {
			return ctrl.Result{}, err
		}
		setCondition(t, evav1.ConditionReady, metav1.ConditionFalse, status.ReasonDecommissioning, msg, now)
		return ctrl.Result{RequeueAfter: WaitDeletion}, nil
	}
	namespaceGone := func() (bool, error) {
		var namespace corev1.Namespace
		found, err := r.get(ctx, types.NamespacedName{Name: ns}, &namespace)
		return !found, err
	}
	// applied says whether Flux applied the last published step through a Kustomization.
	// A Kustomization that is not there has applied nothing: the saga waits, unless the
	// namespace is gone too (nothing is left to order).
	applied := func(workloads bool) (bool, string, error) {
		if err := r.observeDelivery(ctx, s); err != nil {
			return false, "", err
		}
		k := s.observed.GitOps.Foundation
		if workloads {
			k = s.observed.GitOps.Workloads
		}
		switch {
		case k.Applied:
			return true, "", nil
		case !k.Found:
			gone, err := namespaceGone()
			return gone, "waiting for " + k.Kind + " " + k.Name + " to exist and apply " + t.Status.Revision, err
		}
		return false, "waiting for " + k.Kind + " " + k.Name + " to apply " + t.Status.Revision, nil
	}
	// The files of each step.
	stepFiles := func(step evav1.DecommissionStep) ([]render.File, error) {
		switch step {
		case evav1.StepStreamsRemoved:
			return r.Renderer.TenantFilesAt(s.rendered, render.TeardownMessaging)
		case evav1.StepReleasesRemoved:
			return r.Renderer.TenantFilesAt(s.rendered, render.TeardownWorkloads)
		case evav1.StepNamespaceOnly:
			final := s.rendered.DeepCopy()
			final.Spec.Lifecycle = evav1.LifecycleDecommissioned
			return r.Renderer.TenantFiles(final)
		}
		return nil, nil // Removed: out of the tree
	}
	stepDigest := func(step evav1.DecommissionStep, files []render.File) string {
		return sagaDigestPrefix + string(step) + ":" + filesDigest(files)
	}
	publish := func(step evav1.DecommissionStep) (ctrl.Result, error) {
		files, err := stepFiles(step)
		if err != nil {
			return ctrl.Result{}, err
		}
		done, rev, err := r.GitOps.publish(t, stepDigest(step, files), files)
		if !done {
			return wait(fmt.Sprintf("publishing step %s", step), nil)
		}
		if err != nil {
			s.log.Error(err, "publishing a decommission step", "step", step)
			return ctrl.Result{}, err
		}
		t.Status.Revision, t.Status.AppliedDigest, t.Status.DecommissionStep = rev, "", step
		return wait(fmt.Sprintf("published step %s; waiting for it to be applied", step), nil)
	}

	// A saga never goes back: lifecycle cannot leave Decommissioned (the CRD's rule) and
	// a deleted tenant stays deleted, so no live publish follows a step.
	switch step := t.Status.DecommissionStep; step {
	case "":
		// Never published (deleted before its first publish landed) and nothing of it in
		// the cluster: nothing to take apart.
		if _, submitted := r.GitOps.lastSubmitted(t.UID); t.Status.Revision == "" && !submitted {
			if err := r.observeDelivery(ctx, s); err != nil {
				return ctrl.Result{}, err
			}
			gone, err := namespaceGone()
			if err != nil {
				return ctrl.Result{}, err
			}
			if gone && !s.observed.GitOps.Foundation.Found && !s.observed.GitOps.Workloads.Found {
				return r.finishDecommission(ctx, s, now)
			}
		}
		return publish(evav1.StepStreamsRemoved)
	case evav1.StepStreamsRemoved:
		if ok, msg, err := applied(false); err != nil || !ok {
			return wait(msg, err)
		}
		if r.Streams != nil {
			// Direct messaging: the streams live in JetStream only, the operator deletes them.
			if err := r.deleteStreams(ctx, code); err != nil {
				s.log.Error(err, "deleting the tenant's streams")
				return wait("deleting the streams in JetStream failed: see operator logs", nil)
			}
		}
		for _, stream := range []string{tenant.EventsStream(code), tenant.CommandsStream(code)} {
			var st nackv1beta2.Stream
			if found, err := r.get(ctx, types.NamespacedName{Namespace: ns, Name: tenant.StreamObjectName(stream)}, &st); err != nil || found {
				return wait("waiting for Stream "+stream+" to be deleted", err)
			}
		}
		return publish(evav1.StepReleasesRemoved)
	case evav1.StepReleasesRemoved:
		if r.argoCD() {
			// The workloads and module Applications are out of the published tree: the
			// root Application prunes them, and each is gone once Argo CD deleted its
			// resources (the resources finalizer).
			left, err := r.applicationsLeft(ctx, code)
			if err != nil || len(left) > 0 {
				return wait("waiting for Argo CD to delete the Applications and their resources: "+strings.Join(left, ", "), err)
			}
			return publish(evav1.StepNamespaceOnly)
		}
		if ok, msg, err := applied(true); err != nil || !ok {
			return wait(msg, err)
		}
		var releases helmv2.HelmReleaseList
		if err := r.List(ctx, &releases, client.InNamespace(ns)); err != nil {
			return ctrl.Result{}, fmt.Errorf("listing HelmReleases in %s: %w", ns, err)
		}
		if len(releases.Items) > 0 {
			names := make([]string, len(releases.Items))
			for i, hr := range releases.Items {
				names[i] = hr.Name
			}
			return wait("waiting for HelmReleases to be uninstalled: "+strings.Join(names, ", "), nil)
		}
		return publish(evav1.StepNamespaceOnly)
	case evav1.StepNamespaceOnly:
		if ok, msg, err := applied(false); err != nil || !ok {
			return wait(msg, err)
		}
		return publish(evav1.StepRemoved)
	}
	if gone, err := namespaceGone(); err != nil || !gone {
		if r.argoCD() && err == nil {
			// The foundation Application's finalizer deletes the namespace once the root
			// Application pruned it; Argo CD's root does not prune its last Application
			// unless allowed to empty the cluster (allowEmpty).
			if left, err := r.applicationsOf(ctx, code); err != nil || len(left) > 0 {
				return wait("waiting for Argo CD to prune Applications "+strings.Join(left, ", ")+" and Namespace "+ns+
					" (a root Application without allowEmpty keeps the last tenant of its tree)", err)
			}
		}
		return wait("waiting for Namespace "+ns+" to be pruned", err)
	}
	return r.finishDecommission(ctx, s, now)
}
