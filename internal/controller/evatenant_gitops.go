package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
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

// Markers in status.appliedDigest for the GitOps decommission steps.
const (
	digestDecommissioned = "decommissioned"
	digestRemoved        = "removed"
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

// decommissionGitOps is the saga in GitOps mode: publish the decommissioned bundle (the
// namespace alone) and wait until Flux applied it, which prunes releases, streams and
// rules; then remove the tenant from the tree and wait until Flux pruned the namespace.
func (r *EvaTenantReconciler) decommissionGitOps(ctx context.Context, s *scope) (ctrl.Result, error) {
	t := s.tenant
	now := metav1.NewTime(r.now())
	wait := func(msg string) (ctrl.Result, error) {
		setCondition(t, evav1.ConditionReady, metav1.ConditionFalse, ReasonDecommissioning, msg, now)
		return ctrl.Result{RequeueAfter: WaitDeletion}, nil
	}
	switch t.Status.AppliedDigest {
	case digestDecommissioned, digestRemoved:
	default:
		final := t.DeepCopy()
		final.Spec.Lifecycle = evav1.LifecycleDecommissioned
		if err := r.publishTenant(ctx, s, final); err != nil {
			return ctrl.Result{}, err
		}
		t.Status.AppliedDigest = digestDecommissioned
		return wait("waiting for Flux to apply the decommissioned bundle")
	}
	if t.Status.AppliedDigest == digestDecommissioned {
		if err := r.observeKustomization(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		if g := s.observed.GitOps; g.Found && !g.Applied {
			return wait("waiting for Kustomization " + g.Name + " to apply " + t.Status.Revision)
		}
		rev, err := r.GitOps.Batcher.Publish(ctx, render.DirName(t.Spec.CapsuleCode), nil)
		if err != nil {
			s.log.Error(err, "removing the tenant from the published tree")
			return ctrl.Result{}, err
		}
		t.Status.Revision, t.Status.AppliedDigest = rev, digestRemoved
	}
	var namespace corev1.Namespace
	if found, err := r.get(ctx, types.NamespacedName{Name: tenant.Namespace(t.Spec.CapsuleCode)}, &namespace); err != nil || found {
		return wait("waiting for Flux to prune Namespace " + tenant.Namespace(t.Spec.CapsuleCode))
	}
	return r.finishDecommission(ctx, s, now)
}
