package v1alpha1_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// TestKubectlGetShowsWhy: `kubectl get evatenants` (the API server's table, as kubectl
// asks for it) shows the Ready condition's message beside its status, as Flux's objects
// do, so a stuck tenant says why without -o yaml.
func TestKubectlGetShowsWhy(t *testing.T) {
	ctx := context.Background()
	cur := createValidTenant(t)
	why := "module crm: HelmRelease not ready: install retries exhausted"
	cur.Status.Phase = evav1.PhaseFailed
	cur.Status.Conditions = []metav1.Condition{{Type: evav1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: "ModuleFailed", Message: why, LastTransitionTime: metav1.Now()}}
	if err := env.Client.Status().Update(ctx, cur); err != nil {
		t.Fatal(err)
	}

	cfg := rest.CopyConfig(env.Config)
	cfg.APIPath, cfg.GroupVersion = "/apis", &schema.GroupVersion{Group: evav1.GroupVersion.Group, Version: evav1.GroupVersion.Version}
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rc.Get().Namespace(cur.Namespace).Resource("evatenants").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
	}
	want := []string{"Name", "Code", "Tier", "Wave", "Phase", "Ready", "Message", "Age"}
	if !slices.Equal(names, want) {
		t.Fatalf("columns %v, want %v", names, want)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("%d rows", len(table.Rows))
	}
	if got := table.Rows[0].Cells[6]; got != why {
		t.Errorf("Message column %q, want %q", got, why)
	}
}
