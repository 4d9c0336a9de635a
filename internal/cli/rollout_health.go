package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/rollout"
	"github.com/aidonow/eva/internal/safetext"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// releaseHealth says how a tenant fares on a release it was admitted to.
type releaseHealth interface {
	// observe fills in the tenant's OnRelease, Pending, Ready, NotReadySince and Failed
	// fields for a tenant the release admitted; want maps each module the release
	// changes for the tenant to the version it renders.
	observe(ctx context.Context, t *rollout.Tenant, want map[string]evav1.ModuleVersion) error
	// before fills in the Ready and Message fields of a tenant the release has not
	// reached, from its releases of the tier's modules as they are.
	before(ctx context.Context, t *rollout.Tenant, modules []string) error
	// describe says where the health came from, for the commit message.
	describe() string
}

// assumedHealth is --assume-ready: whoever runs the promotion vouches that every
// tenant the release reached is Ready on it (no cluster access from where the
// repository's automation runs). The commit says so.
type assumedHealth struct{}

func (assumedHealth) observe(_ context.Context, t *rollout.Tenant, _ map[string]evav1.ModuleVersion) error {
	t.OnRelease, t.Ready = true, true
	return nil
}

func (assumedHealth) before(_ context.Context, t *rollout.Tenant, _ []string) error {
	t.Ready = true
	return nil
}

func (assumedHealth) describe() string {
	return "assumed Ready (--assume-ready): the cluster was not read"
}

// clusterHealth reads the tenants' HelmReleases, as Flux applied them from the
// published render: on the release once each changed module's release asks for its
// version; Ready once helm-controller has the release Ready at that chart version for
// the current generation; Failed once helm-controller gave up on it.
type clusterHealth struct {
	c      client.Client
	server string
}

func (h clusterHealth) describe() string { return "read from the cluster at " + h.server }

func (h clusterHealth) observe(ctx context.Context, t *rollout.Tenant, want map[string]evav1.ModuleVersion) error {
	ns := tenant.Namespace(t.Code)
	t.Ready, t.OnRelease = true, true
	var failures []string
	for _, module := range slices.Sorted(maps.Keys(want)) {
		version := string(want[module])
		var hr helmv2.HelmRelease
		err := h.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module}, &hr)
		if apierrors.IsNotFound(err) {
			t.Pending, t.OnRelease, t.Ready = true, false, false
			continue
		}
		if err != nil {
			return fmt.Errorf("reading HelmRelease %s/%s: %w", ns, module, err)
		}
		if render.ReleaseChartVersion(&hr) != version {
			// Flux has not applied the commit that admitted the tenant yet.
			t.Pending, t.OnRelease, t.Ready = true, false, false
			continue
		}
		ready := apimeta.FindStatusCondition(hr.Status.Conditions, "Ready")
		latest := hr.Status.History.Latest()
		// From the tenant's OCIRepository, helm-controller installs the version with
		// the artifact's digest appended.
		readyOnVersion := ready != nil && ready.ObservedGeneration == hr.Generation && ready.Status == metav1.ConditionTrue &&
			latest != nil && status.SameChartVersion(latest.ChartVersion, version, "")
		if !readyOnVersion {
			t.Ready = false
			if ready != nil && ready.Status != metav1.ConditionTrue &&
				(t.NotReadySince.IsZero() || ready.LastTransitionTime.Before(&metav1.Time{Time: t.NotReadySince})) {
				t.NotReadySince = ready.LastTransitionTime.Time
			}
		}
		if msg, at, failed := releaseFailed(&hr, ready); failed {
			failures = append(failures, fmt.Sprintf("HelmRelease %s/%s: %s", ns, module, msg))
			if t.FailedAt.IsZero() || at.Before(t.FailedAt) {
				t.FailedAt = at
			}
		}
	}
	if len(failures) > 0 {
		t.Failed, t.Message = true, strings.Join(failures, "; ")
	}
	return nil
}

func (h clusterHealth) before(ctx context.Context, t *rollout.Tenant, modules []string) error {
	ns := tenant.Namespace(t.Code)
	var problems []string
	for _, module := range modules {
		var hr helmv2.HelmRelease
		err := h.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module}, &hr)
		if apierrors.IsNotFound(err) {
			problems = append(problems, fmt.Sprintf("HelmRelease %s/%s not deployed", ns, module))
			continue
		}
		if err != nil {
			return fmt.Errorf("reading HelmRelease %s/%s: %w", ns, module, err)
		}
		ready := apimeta.FindStatusCondition(hr.Status.Conditions, "Ready")
		if ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != hr.Generation {
			reason := "not reconciled"
			if ready != nil {
				reason = ready.Reason // not the message: it would be committed (see releaseFailed)
			}
			problems = append(problems, fmt.Sprintf("HelmRelease %s/%s: %s", ns, module, safetext.Limit(reason, 100)))
		}
	}
	t.Ready, t.Message = len(problems) == 0, strings.Join(problems, "; ")
	return nil
}

// releaseFailed reports whether helm-controller gave up on the release's current
// generation (Stalled, or its remediation retries exhausted), with its reason and
// message and since when.
func releaseFailed(hr *helmv2.HelmRelease, ready *metav1.Condition) (string, time.Time, bool) {
	if hr.Status.LastAttemptedGeneration != hr.Generation {
		return "", time.Time{}, false
	}
	stalled := apimeta.FindStatusCondition(hr.Status.Conditions, "Stalled")
	exhausted := false
	if rem := hr.GetActiveRemediation(); rem != nil {
		exhausted = rem.RetriesExhausted(hr)
	}
	isStalled := stalled != nil && stalled.Status == metav1.ConditionTrue
	if !exhausted && !isStalled {
		return "", time.Time{}, false
	}
	c := ready
	if isStalled {
		c = stalled
	}
	if c == nil {
		return "retries exhausted", time.Now(), true
	}
	// The reason only: what is said here is committed to the repository's history for
	// good, and helm-controller's messages can quote rendered values.
	return c.Reason, c.LastTransitionTime.Time, true
}
