package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/tenant"
)

func TestProvisionToActive(t *testing.T) {
	startOperator(t, "")
	cases := map[string]struct {
		code    string
		tier    evav1.Tier
		modules []string
	}{
		"starter":    {"PROVST", evav1.TierStarter, []string{"crm", "itsm"}},
		"enterprise": {"PROVEN", evav1.TierEnterprise, []string{"crm", "itsm", "whisper", "forge", "shell", "gateway"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns := newTestNamespace(t)
			tn := newTenant(ns, tc.code, tc.tier)
			createTenant(t, tn)

			got := waitPhase(t, tn, evav1.PhaseProvisioning)
			if c := condition(got, evav1.ConditionNamespaceReady); c.Status != "True" {
				eventually(t, waitFor, "NamespaceReady", func() error {
					got = getTenant(t, tn)
					if condition(got, evav1.ConditionNamespaceReady).Status != "True" {
						return errNot("NamespaceReady")
					}
					return nil
				})
			}
			if !slices.Contains(got.Finalizers, tenant.Finalizer) || got.Labels[tenant.LabelWave] != "2" {
				t.Errorf("finalizer or wave label missing: %v %v", got.Finalizers, got.Labels)
			}
			if len(got.Status.Inventory) < 10 {
				t.Errorf("inventory of %d objects", len(got.Status.Inventory))
			}
			if kstatusOf(t, got) == status.CurrentStatus {
				t.Error("kstatus says Current before the tenant is Ready")
			}

			startStandIn(t)
			got = waitPhase(t, tn, evav1.PhaseActive)
			for _, ct := range []string{evav1.ConditionNamespaceReady, evav1.ConditionProvisioned, evav1.ConditionSeedLoaded,
				evav1.ConditionModulesDeployed, evav1.ConditionIngressReady, evav1.ConditionReady} {
				c := condition(got, ct)
				if c.Status != "True" || c.ObservedGeneration != got.Generation {
					t.Errorf("%s = %s (generation %d of %d): %s", ct, c.Status, c.ObservedGeneration, got.Generation, c.Message)
				}
				if _, ok := got.Status.FirstTrue[ct]; !ok {
					t.Errorf("no first-true time for %s", ct)
				}
			}
			if got.Status.ObservedGeneration != got.Generation || len(got.Status.Modules) != len(tc.modules) {
				t.Errorf("observedGeneration %d of %d, %d modules", got.Status.ObservedGeneration, got.Generation, len(got.Status.Modules))
			}
			if s := kstatusOf(t, got); s != status.CurrentStatus {
				t.Errorf("kstatus = %s, want Current (kubectl wait --for=condition=Ready must work)", s)
			}
			eventually(t, waitFor, "events", func() error {
				reasons := eventReasons(t, got)
				for _, want := range []string{"ProvisioningStarted", "NamespaceCreated", "ModuleDeployStarted", "SeedLoaded",
					"ModuleDeployComplete", "IngressProvisioned", "ProvisioningComplete"} {
					n := 0
					for _, r := range reasons {
						if r == want {
							n++
						}
					}
					if n != 1 {
						return errNot(want + " exactly once: " + strings.Join(reasons, " "))
					}
				}
				return nil
			})
		})
	}
}

func kstatusOf(t testing.TB, tn *evav1.EvaTenant) status.Status {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tn)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(evav1.GroupVersion.String())
	u.SetKind(evav1.Kind)
	res, err := status.Compute(u)
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

type errNot string

func (e errNot) Error() string { return "not yet: " + string(e) }

// TestWorkloadsWaitForTheQuota: until kube-controller-manager records the tenant's
// quota limits in its status, the API server's quota admission lets any pod in, so the
// operator applies the foundation but holds the releases and the seed Job back, and says
// so in Provisioned. Once the quota is enforced they are applied and the tenant goes on
// to Active.
func TestWorkloadsWaitForTheQuota(t *testing.T) {
	ctx := context.Background()
	startOperator(t, "")
	startStandIn(t)
	const code = "QUOTAW"
	nsName := tenant.Namespace(code)
	holdQuota(t, nsName)
	tn := newTenant(newTestNamespace(t), code, evav1.TierStarter)
	createTenant(t, tn)

	eventually(t, waitFor, "Provisioned says the modules wait for the quota", func() error {
		c := condition(getTenant(t, tn), evav1.ConditionProvisioned)
		if c.Status != "False" || !strings.Contains(c.Message, "modules wait for the quota") || !strings.Contains(c.Message, "requests.cpu") {
			return errNot(fmt.Sprintf("Provisioned %s: %s", c.Status, c.Message))
		}
		return nil
	})
	consistently(t, "nothing that runs pods is applied before the quota is enforced", func() error {
		var rq corev1.ResourceQuotaList
		if err := k8s.List(ctx, &rq, client.InNamespace(nsName)); err != nil || len(rq.Items) != 1 || len(rq.Items[0].Status.Hard) != 0 {
			return fmt.Errorf("quotas %v (%v), want one, not enforced", rq.Items, err)
		}
		var releases helmv2.HelmReleaseList
		var jobs batchv1.JobList
		if err := k8s.List(ctx, &releases, client.InNamespace(nsName)); err != nil || len(releases.Items) > 0 {
			return fmt.Errorf("%d HelmRelease(s) (%v) while the quota is not enforced", len(releases.Items), err)
		}
		if err := k8s.List(ctx, &jobs, client.InNamespace(nsName)); err != nil || len(jobs.Items) > 0 {
			return fmt.Errorf("%d Job(s) (%v) while the quota is not enforced", len(jobs.Items), err)
		}
		return nil
	})

	releaseQuota(nsName)
	got := waitPhase(t, tn, evav1.PhaseActive)
	if len(got.Status.Modules) != 2 {
		t.Errorf("modules %v, want crm and itsm", got.Status.Modules)
	}
}
