package controller

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

func TestStalledReleaseFailsTenantAndRecovers(t *testing.T) {
	startOperator(t, "")
	ns := newTestNamespace(t)
	tn := newTenant(ns, "STALLD", evav1.TierStarter)
	createTenant(t, tn)
	playFlux(t, tn, []string{"crm", "itsm"})
	waitPhase(t, tn, evav1.PhaseActive)

	markReleaseStalled(t, "STALLD", "itsm")
	got := waitPhase(t, tn, evav1.PhaseFailed)
	ready := condition(got, evav1.ConditionReady)
	if ready.Status != "False" || !strings.Contains(ready.Message, "HelmRelease eva-tenant-stalld/itsm: RetriesExceeded") {
		t.Errorf("Ready = %s %q, want the release named with its reason", ready.Status, ready.Message)
	}
	if c := condition(got, evav1.ConditionModulesDeployed); c.Reason != "ReleaseStalled" {
		t.Errorf("ModulesDeployed reason %q", c.Reason)
	}
	eventually(t, waitFor, "ProvisioningFailed event", func() error {
		for _, r := range eventReasons(t, got) {
			if r == "ProvisioningFailed" {
				return nil
			}
		}
		return errNot("ProvisioningFailed")
	})

	markReleaseReady(t, "STALLD", "itsm")
	got = waitPhase(t, tn, evav1.PhaseActive)
	if c := condition(got, evav1.ConditionReady); c.Status != "True" {
		t.Errorf("after recovery Ready = %s", c.Status)
	}
}

func TestInvalidTenantFailsWithoutHotLoop(t *testing.T) {
	startOperator(t, "")
	ns := newTestNamespace(t)
	// The CRD cannot check that a module belongs to the tier; the operator does.
	tn := newTenant(ns, "BADMOD", evav1.TierStarter)
	tn.Spec.Versions = map[string]evav1.ModuleVersion{"forge": "0.6.0"}
	createTenant(t, tn)
	got := waitPhase(t, tn, evav1.PhaseFailed)
	c := condition(got, evav1.ConditionReady)
	if c.Reason != "InvalidSpec" || !strings.Contains(c.Message, "spec.versions[forge]") {
		t.Fatalf("Ready = %s %q", c.Reason, c.Message)
	}
	rv := got.ResourceVersion
	// Nothing was applied, and the tenant is not rewritten over and over.
	var list unstructured.UnstructuredList
	list.SetAPIVersion("v1")
	list.SetKind("NamespaceList")
	_ = k8s.List(context.Background(), &list, client.MatchingLabels{"eva.aidonow.com/capsule": "BADMOD"})
	if len(list.Items) != 0 {
		t.Errorf("an invalid tenant got a namespace")
	}
	consistently(t, "tenant not rewritten", func() error {
		if getTenant(t, tn).ResourceVersion != rv {
			return errNot("stable resourceVersion")
		}
		return nil
	})
}
