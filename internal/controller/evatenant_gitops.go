package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

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
	// Revisions tells whether an applied revision includes a published one.
	Revisions interface {
		Contains(ctx context.Context, applied, published string) (bool, error)
	}
}

// Markers an earlier operator version kept in status.appliedDigest for the GitOps
// decommission steps (now status.decommissionStep); read once to resume such a saga.
const (
	legacyDigestDecommissioned = "decommissioned"
	legacyDigestRemoved        = "removed"
)

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
// together share commits) unless what is published is already current.
func (r *EvaTenantReconciler) publishTenant(ctx context.Context, s *scope, t *evav1.EvaTenant) error {
	files, err := r.Renderer.TenantFiles(t)
	if err != nil {
		return err
	}
	digest := filesDigest(files)
	if s.tenant.Status.AppliedDigest == digest && s.tenant.Status.Revision != "" {
		s.observed.Applied.Revision = s.tenant.Status.Revision
		return nil
	}
	rev, err := r.GitOps.Batcher.Publish(ctx, render.DirName(t.Spec.CapsuleCode), files)
	if err != nil {
		s.log.Error(err, "publishing tenant")
		s.observed.Applied.Error = "publishing the tenant failed: see operator logs"
		return err
	}
	if s.tenant.Status.AppliedDigest != digest {
		s.event(corev1.EventTypeNormal, "ModuleDeployStarted", "Published revision %s", rev)
	}
	s.tenant.Status.Revision, s.tenant.Status.AppliedDigest = rev, digest
	s.observed.Applied.Revision = rev
	return nil
}

// observeKustomization reads the tenant's Flux Kustomization and whether it applied the
// published revision (or a later one).
func (r *EvaTenantReconciler) observeKustomization(ctx context.Context, s *scope) error {
	t := s.tenant
	key := types.NamespacedName{Namespace: r.Renderer.Env.Settings.FluxNamespace, Name: tenant.Namespace(t.Spec.CapsuleCode)}
	var ks kustomizev1.Kustomization
	found, err := r.get(ctx, key, &ks)
	if err != nil {
		return err
	}
	g := &status.GitOpsState{Name: key.String(), Found: found}
	if found {
		g.Ready = apimeta.FindStatusCondition(ks.Status.Conditions, "Ready")
		g.LastAppliedRevision = ks.Status.LastAppliedRevision
		g.Applied = r.applied(ctx, ks.Status.LastAppliedRevision, t.Status.Revision)
	}
	s.observed.GitOps = g
	return nil
}

// applied reports whether Flux's revision ("main@sha1:<commit>", "<tag>@sha256:<digest>")
// includes the published one.
func (r *EvaTenantReconciler) applied(ctx context.Context, fluxRevision, published string) bool {
	if fluxRevision == "" || published == "" {
		return false
	}
	applied := fluxRevision
	if i := strings.LastIndex(fluxRevision, ":"); i >= 0 {
		applied = fluxRevision[i+1:]
	}
	published = strings.TrimPrefix(published, "sha256:")
	if applied == published {
		return true
	}
	ok, err := r.GitOps.Revisions.Contains(ctx, applied, published)
	return err == nil && ok
}

// decommissionGitOps is the saga in GitOps mode, in the same order as in pure-cluster
// mode, each step a publish Flux applies (and prunes) before the next is published:
//  1. the bundle without streams and alert rules; wait until Flux applied it and the
//     Stream objects are gone (NACK deletes the streams);
//  2. the foundation alone (namespace, deployer account and binding, quota, limits,
//     policy); wait until helm-controller uninstalled every release, as the deployer
//     account that is still there;
//  3. the tenant out of the tree; wait until Flux pruned the namespace.
//
// status.decommissionStep records the step Flux was asked to apply, so a restarted
// operator resumes where the saga was.
func (r *EvaTenantReconciler) decommissionGitOps(ctx context.Context, s *scope) (ctrl.Result, error) {
	t := s.tenant
	now := metav1.NewTime(r.now())
	code := t.Spec.CapsuleCode
	ns := tenant.Namespace(code)
	wait := func(msg string) (ctrl.Result, error) {
		setCondition(t, evav1.ConditionReady, metav1.ConditionFalse, ReasonDecommissioning, msg, now)
		return ctrl.Result{RequeueAfter: WaitDeletion}, nil
	}
	// Tenants in the middle of the saga under an operator that kept its step in
	// status.appliedDigest.
	switch t.Status.AppliedDigest {
	case legacyDigestDecommissioned:
		t.Status.DecommissionStep, t.Status.AppliedDigest = evav1.StepReleasesRemoved, ""
	case legacyDigestRemoved:
		t.Status.DecommissionStep, t.Status.AppliedDigest = evav1.StepRemoved, ""
	}
	// appliedOrWait reports whether Flux applied the last published step.
	applied := func() (bool, string, error) {
		if err := r.observeKustomization(ctx, s); err != nil {
			return false, "", err
		}
		if g := s.observed.GitOps; g.Found && !g.Applied {
			return false, "waiting for Kustomization " + g.Name + " to apply " + t.Status.Revision, nil
		}
		return true, "", nil
	}
	publish := func(stage render.Stage, step evav1.DecommissionStep) (ctrl.Result, error) {
		var files []render.File
		if step != evav1.StepRemoved {
			var err error
			if files, err = r.Renderer.TenantFilesAt(t, stage); err != nil {
				return ctrl.Result{}, err
			}
		}
		rev, err := r.GitOps.Batcher.Publish(ctx, render.DirName(code), files)
		if err != nil {
			s.log.Error(err, "publishing a decommission step", "step", step)
			return ctrl.Result{}, err
		}
		t.Status.Revision, t.Status.AppliedDigest, t.Status.DecommissionStep = rev, "", step
		return wait(fmt.Sprintf("published %s; waiting for Flux to apply it", step))
	}

	switch t.Status.DecommissionStep {
	case "":
		return publish(render.StageWithoutStreams, evav1.StepStreamsRemoved)
	case evav1.StepStreamsRemoved:
		if ok, msg, err := applied(); err != nil || !ok {
			return wrapWait(wait, msg, err)
		}
		for _, stream := range []string{tenant.EventsStream(code), tenant.CommandsStream(code)} {
			var st nackv1beta2.Stream
			if found, err := r.get(ctx, types.NamespacedName{Namespace: ns, Name: tenant.StreamObjectName(stream)}, &st); err != nil || found {
				return wrapWait(wait, "waiting for Stream "+stream+" to be deleted", err)
			}
		}
		return publish(render.StageFoundation, evav1.StepReleasesRemoved)
	case evav1.StepReleasesRemoved:
		if ok, msg, err := applied(); err != nil || !ok {
			return wrapWait(wait, msg, err)
		}
		names, err := r.releaseNames(ctx, t)
		if err != nil {
			return ctrl.Result{}, err
		}
		var remaining []string
		for _, module := range names {
			var hr helmv2.HelmRelease
			found, err := r.get(ctx, types.NamespacedName{Namespace: ns, Name: module}, &hr)
			if err != nil {
				return ctrl.Result{}, err
			}
			if found {
				remaining = append(remaining, module)
			}
		}
		if len(remaining) > 0 {
			return wait("waiting for HelmReleases to be uninstalled: " + strings.Join(remaining, ", "))
		}
		return publish(render.StageFull, evav1.StepRemoved)
	}
	var namespace corev1.Namespace
	if found, err := r.get(ctx, types.NamespacedName{Name: ns}, &namespace); err != nil || found {
		return wrapWait(wait, "waiting for Flux to prune Namespace "+ns, err)
	}
	return r.finishDecommission(ctx, s, now)
}

// wrapWait returns err if there is one (retried with backoff), or waits with msg.
func wrapWait(wait func(string) (ctrl.Result, error), msg string, err error) (ctrl.Result, error) {
	if err != nil {
		return ctrl.Result{}, err
	}
	return wait(msg)
}
