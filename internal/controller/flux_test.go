package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenant"
)

const waitFor = 30 * time.Second

type tenantOpt func(*evav1.EvaTenant)

func newTenant(ns, code string, tier evav1.Tier, opts ...tenantOpt) *evav1.EvaTenant {
	t := &evav1.EvaTenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.ToLower(code)},
		Spec:       evav1.EvaTenantSpec{CapsuleCode: code, Tier: tier, SeedsVersion: "seeds-1", Wave: 2},
	}
	for _, o := range opts {
		o(t)
	}
	return t
}

func createTenant(t testing.TB, tn *evav1.EvaTenant) {
	t.Helper()
	if err := k8s.Create(context.Background(), tn); err != nil {
		t.Fatal(err)
	}
}

func getTenant(t testing.TB, tn *evav1.EvaTenant) *evav1.EvaTenant {
	t.Helper()
	var got evav1.EvaTenant
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: tn.Namespace, Name: tn.Name}, &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

func condition(tn *evav1.EvaTenant, ct string) metav1.Condition {
	if c := apimeta.FindStatusCondition(tn.Status.Conditions, ct); c != nil {
		return *c
	}
	return metav1.Condition{Type: ct, Status: metav1.ConditionUnknown}
}

// waitPhase waits for the tenant to reach a phase.
func waitPhase(t testing.TB, tn *evav1.EvaTenant, phase evav1.Phase) *evav1.EvaTenant {
	t.Helper()
	var got *evav1.EvaTenant
	eventually(t, waitFor, fmt.Sprintf("%s phase %s", tn.Spec.CapsuleCode, phase), func() error {
		got = getTenant(t, tn)
		if got.Status.Phase != phase {
			return fmt.Errorf("phase %q, Ready: %s", got.Status.Phase, condition(got, evav1.ConditionReady).Message)
		}
		return nil
	})
	return got
}

// The test plays Flux, NACK, the Job controller and the ingress controller by writing
// the status each would write.

func markReleaseReady(t testing.TB, code, module string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, waitFor, "HelmRelease "+module+" ready", func() error {
		var hr helmv2.HelmRelease
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: tenant.Namespace(code), Name: module}, &hr); err != nil {
			return err
		}
		hr.Status.ObservedGeneration = hr.Generation
		hr.Status.LastAttemptedRevision = hr.Spec.Chart.Spec.Version
		apimeta.SetStatusCondition(&hr.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue,
			Reason: "InstallSucceeded", Message: "Helm install succeeded", ObservedGeneration: hr.Generation})
		apimeta.RemoveStatusCondition(&hr.Status.Conditions, "Stalled")
		return k8s.Status().Update(ctx, &hr)
	})
}

func markReleaseStalled(t testing.TB, code, module string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, waitFor, "HelmRelease "+module+" stalled", func() error {
		var hr helmv2.HelmRelease
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: tenant.Namespace(code), Name: module}, &hr); err != nil {
			return err
		}
		hr.Status.ObservedGeneration = hr.Generation
		apimeta.SetStatusCondition(&hr.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse,
			Reason: "UpgradeFailed", Message: "Helm upgrade failed: timed out waiting for the condition", ObservedGeneration: hr.Generation})
		apimeta.SetStatusCondition(&hr.Status.Conditions, metav1.Condition{Type: "Stalled", Status: metav1.ConditionTrue,
			Reason: "RetriesExceeded", Message: "Failed to upgrade after 3 attempt(s)", ObservedGeneration: hr.Generation})
		return k8s.Status().Update(ctx, &hr)
	})
}

func markStreamsReady(t testing.TB, code string) {
	t.Helper()
	ctx := context.Background()
	for _, s := range []string{tenant.EventsStream(code), tenant.CommandsStream(code)} {
		eventually(t, waitFor, "Stream "+s+" ready", func() error {
			var st nackv1beta2.Stream
			if err := k8s.Get(ctx, types.NamespacedName{Namespace: tenant.Namespace(code), Name: tenant.StreamObjectName(s)}, &st); err != nil {
				return err
			}
			apimeta.SetStatusCondition(&st.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Created", Message: "Stream successfully created"})
			return k8s.Status().Update(ctx, &st)
		})
	}
}

func markSeedJobComplete(t testing.TB, code, seeds string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, waitFor, "seed Job complete", func() error {
		var job batchv1.Job
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: tenant.Namespace(code), Name: render.SeedJobName(seeds)}, &job); err != nil {
			return err
		}
		if job.Status.CompletionTime != nil {
			return nil // already complete (a Job left from an earlier run of the test)
		}
		now := metav1.Now()
		job.Status.StartTime, job.Status.CompletionTime, job.Status.Succeeded = &now, &now, 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		return k8s.Status().Update(ctx, &job)
	})
}

func markIngressAddress(t testing.TB, code string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, waitFor, "Ingress address", func() error {
		var ing networkingv1.Ingress
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: tenant.Namespace(code), Name: tenant.IngressName(code)}, &ing); err != nil {
			return err
		}
		ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "203.0.113.10"}}
		return k8s.Status().Update(ctx, &ing)
	})
}

// playFlux makes every dependency of a tenant ready.
func playFlux(t testing.TB, tn *evav1.EvaTenant, modules []string) {
	t.Helper()
	code := tn.Spec.CapsuleCode
	for _, m := range modules {
		markReleaseReady(t, code, m)
	}
	markStreamsReady(t, code)
	if tn.Spec.SeedsVersion != "" {
		markSeedJobComplete(t, code, tn.Spec.SeedsVersion)
	}
	markIngressAddress(t, code)
}

// eventReasons lists the reasons of the events recorded about a tenant, in order.
func eventReasons(t testing.TB, tn *evav1.EvaTenant) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == tn.Name && e.Regarding.Namespace == tn.Namespace {
			out = append(out, e.Reason)
		}
	}
	return out
}
