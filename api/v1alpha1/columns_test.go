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
	// kubectl get shows the columns of priority 0; -o wide adds the others.
	var names, wide []string
	message := -1
	for i, c := range table.ColumnDefinitions {
		if c.Name == "Message" {
			message = i
		}
		if c.Priority == 0 {
			names = append(names, c.Name)
		} else {
			wide = append(wide, c.Name)
		}
	}
	want := []string{"Name", "Code", "Tier", "Wave", "Phase", "Ready", "Message", "Age"}
	if !slices.Equal(names, want) || !slices.Equal(wide, []string{"Cell"}) {
		t.Fatalf("columns %v and with -o wide %v, want %v and [Cell]", names, wide, want)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("%d rows", len(table.Rows))
	}
	if got := table.Rows[0].Cells[message]; got != why {
		t.Errorf("Message column %q, want %q", got, why)
	}
}
