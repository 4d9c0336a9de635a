package controller

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/status"
)

func TestInvalidTenantFailsWithoutHotLoop(t *testing.T) {
	startOperator(t, "")
	ns := newTestNamespace(t)
	// The CRD cannot check that a module belongs to the tier; the operator does.
	tn := newTenant(ns, "BADMOD", evav1.TierStarter)
	tn.Spec.Versions = map[string]evav1.ModuleVersion{"forge": "0.6.0"}
	createTenant(t, tn)
	got := waitPhase(t, tn, evav1.PhaseFailed)
	c := condition(got, evav1.ConditionReady)
	if c.Reason != status.ReasonInvalidSpec || !strings.Contains(c.Message, "spec.versions[forge]") {
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
