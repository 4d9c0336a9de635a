package controller

import (
	"slices"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

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
