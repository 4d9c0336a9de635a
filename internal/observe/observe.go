// Package observe reads a tenant's objects from a cluster into status.Observed, for
// status.Compute to judge: the operator reads them from its cache for the tenant's
// conditions, and evactl from a cell's API server when it moves a tenant file between
// cells (the target is Active by the same rules). It decides nothing.
package observe

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// Get reads one object: false (and no error) when it does not exist.
func Get(ctx context.Context, c client.Reader, key types.NamespacedName, obj client.Object) (bool, error) {
	err := c.Get(ctx, key, obj)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("reading %T %s: %w", obj, key, err)
}

// Objects reads the tenant's namespace, its two NACK Stream objects (unless
// directStreams: the operator then reads JetStream itself), its seed Job of
// seedsVersion ("" for none) and its Ingress into o.
func Objects(ctx context.Context, c client.Reader, code, seedsVersion string, directStreams bool, o *status.Observed) error {
	ns := tenant.Namespace(code)
	var namespace corev1.Namespace
	found, err := Get(ctx, c, types.NamespacedName{Name: ns}, &namespace)
	if err != nil {
		return err
	}
	if found {
		o.Namespace = &status.NamespaceState{Name: ns, Phase: string(namespace.Status.Phase)}
		if namespace.DeletionTimestamp != nil {
			o.Namespace.Phase = string(corev1.NamespaceTerminating)
		}
	} else {
		o.Applied.Missing = append(o.Applied.Missing, "Namespace/"+ns)
	}
	if !directStreams {
		for _, stream := range []string{tenant.EventsStream(code), tenant.CommandsStream(code)} {
			name := tenant.StreamObjectName(stream)
			var st nackv1beta2.Stream
			found, err := Get(ctx, c, types.NamespacedName{Namespace: ns, Name: name}, &st)
			if err != nil {
				return err
			}
			o.Streams = append(o.Streams, status.StreamState{Name: ns + "/" + name, Found: found,
				Ready: apimeta.FindStatusCondition(st.Status.Conditions, "Ready")})
		}
	}
	if seedsVersion != "" {
		if o.SeedJob, err = seedJob(ctx, c, ns, render.SeedJobName(seedsVersion)); err != nil {
			return err
		}
	}
	var ing networkingv1.Ingress
	name := tenant.IngressName(code)
	if found, err := Get(ctx, c, types.NamespacedName{Namespace: ns, Name: name}, &ing); err != nil {
		return err
	} else if found {
		o.Ingress = &status.IngressState{Name: ns + "/" + name, Addresses: len(ing.Status.LoadBalancer.Ingress)}
	}
	return nil
}

// seedJob reads the seed Job (nil when missing).
func seedJob(ctx context.Context, c client.Reader, ns, name string) (*status.JobState, error) {
	var job batchv1.Job
	found, err := Get(ctx, c, types.NamespacedName{Namespace: ns, Name: name}, &job)
	if err != nil || !found {
		return nil, err
	}
	js := &status.JobState{Name: ns + "/" + name}
	for _, cond := range job.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case batchv1.JobComplete:
			js.Complete = true
		case batchv1.JobFailed:
			js.Failed, js.Message = true, fmt.Sprintf("%s: %s", cond.Reason, cond.Message)
		}
	}
	return js, nil
}

// Module is one module release a tenant renders: its chart version and the spec
// digest its HelmRelease carries when it is the current spec ("" when unknown).
type Module struct {
	Name, Version, SpecDigest string
	// ChartDigest is the digest the module's chart source pins ("" for none).
	ChartDigest string
}

// HelmReleases reads each module's HelmRelease in the tenant's namespace: what
// helm-controller says of it, and whether that is about the spec rendered now.
func HelmReleases(ctx context.Context, c client.Reader, code string, modules []Module) ([]status.ReleaseState, error) {
	ns := tenant.Namespace(code)
	out := make([]status.ReleaseState, 0, len(modules))
	for _, m := range modules {
		var hr helmv2.HelmRelease
		found, err := Get(ctx, c, types.NamespacedName{Namespace: ns, Name: m.Name}, &hr)
		if err != nil {
			return nil, err
		}
		rs := status.ReleaseState{Module: m.Name, Name: ns + "/" + m.Name, Version: m.Version, ChartDigest: m.ChartDigest, Found: found}
		if found {
			if m.SpecDigest != "" && hr.Annotations[tenant.AnnotationSpecDigest] != m.SpecDigest {
				rs.Outdated = true
			}
			rs.Generation, rs.ObservedGeneration = hr.Generation, hr.Status.ObservedGeneration
			rs.Ready = apimeta.FindStatusCondition(hr.Status.Conditions, "Ready")
			rs.Stalled = apimeta.FindStatusCondition(hr.Status.Conditions, "Stalled")
			rs.LastAttemptedRevision = hr.Status.LastAttemptedRevision
			if latest := hr.Status.History.Latest(); latest != nil {
				rs.HistoryVersion = latest.ChartVersion
			}
			// Retries count for the generation helm-controller last attempted; a new
			// spec resets them.
			if rem := hr.GetActiveRemediation(); rem != nil && hr.Status.LastAttemptedGeneration == hr.Generation {
				rs.RetriesExhausted = rem.RetriesExhausted(&hr)
				rs.LastAction, rs.Failures = string(hr.Status.LastAttemptedReleaseAction), rem.GetFailureCount(&hr)
			}
		}
		out = append(out, rs)
	}
	return out, nil
}

// Applied says whether a GitOps tool's applied revision holds the tenant's files as
// published, and when that cannot be told, why.
type Applied func(ctx context.Context, revision string) (bool, string)

// Kustomizations reads the tenant's two Flux Kustomizations in fluxNamespace, each
// Applied as applied judges its last applied revision.
func Kustomizations(ctx context.Context, c client.Reader, fluxNamespace, code string, applied Applied) (*status.GitOpsState, error) {
	g := &status.GitOpsState{}
	for _, k := range []struct {
		name  string
		state *status.DeliveryState
	}{{render.FoundationName(code), &g.Foundation}, {render.WorkloadsName(code), &g.Workloads}} {
		key := types.NamespacedName{Namespace: fluxNamespace, Name: k.name}
		var ks kustomizev1.Kustomization
		found, err := Get(ctx, c, key, &ks)
		if err != nil {
			return nil, err
		}
		*k.state = status.DeliveryState{Kind: kustomizev1.KustomizationKind, Name: key.String(), Found: found}
		if found {
			k.state.Ready = apimeta.FindStatusCondition(ks.Status.Conditions, "Ready")
			k.state.LastAppliedRevision = ks.Status.LastAppliedRevision
			k.state.Applied, k.state.RevisionError = applied(ctx, ks.Status.LastAppliedRevision)
		}
	}
	return g, nil
}
