package render

import (
	"bytes"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/manifest"
)

// TestTypedEncodingMatchesPlain checks the fast typed encoder against the plain one
// (typed → map → YAML) on every object of every tier and on varied tenants: both
// must write the same bytes.
func TestTypedEncodingMatchesPlain(t *testing.T) {
	r := renderer(t)
	tenants := append(syntheticTenants(40),
		tenantFor("ACMECO", withTier(evav1.TierCustomer), withSecretMount(t, "crm", "crm-database"), withPin("whisper", "0.9.1")),
		tenantFor("OLDTNT", withLifecycle(evav1.LifecycleDecommissioned)),
		tenantFor("NOSEED", withSeeds("")))
	for _, tn := range tenants {
		b, err := r.Bundle(tn)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range b.objects {
			if o.plain != nil {
				continue // patched: written from its plain form anyway
			}
			var typed, plain bytes.Buffer
			if err := manifest.EncodeTyped(&typed, o.typed); err != nil {
				t.Fatal(err)
			}
			m, err := manifest.ToMap(o.typed)
			if err != nil {
				t.Fatal(err)
			}
			if err := manifest.Encode(&plain, m); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(typed.Bytes(), plain.Bytes()) {
				t.Fatalf("%s %T: typed encoding differs\n--- typed\n%s\n--- plain\n%s", tn.Spec.CapsuleCode, o.typed, typed.String(), plain.String())
			}
		}
	}
}

// TestToMapMatchesConverter checks the fast ToMap against what it replaces, the
// apimachinery converter followed by Clean, on every object of every tier and of varied
// tenants (helm values with integers, floats and nested lists included): the same maps,
// down to the Go type of each number.
func TestToMapMatchesConverter(t *testing.T) {
	r := renderer(t)
	tenants := append(syntheticTenants(40),
		tenantFor("ACMECO", withTier(evav1.TierCustomer), withSecretMount(t, "crm", "crm-database"), withPin("whisper", "0.9.1"),
			withValues("crm", map[string]any{"replicaCount": 2, "ratio": 0.25, "whole": 3.0, "big": 1e3,
				"list": []any{1, "a", map[string]any{"x": nil}}})),
		tenantFor("OLDTNT", withLifecycle(evav1.LifecycleDecommissioned)),
		tenantFor("NOSEED", withSeeds("")))
	seen := map[string]bool{}
	for _, tn := range tenants {
		b, err := r.Bundle(tn)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range b.objects {
			want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o.typed)
			if err != nil {
				t.Fatal(err)
			}
			manifest.Clean(want)
			got, err := manifest.ToMap(o.typed)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s %T: ToMap differs from the converter\n got %#v\nwant %#v", tn.Spec.CapsuleCode, o.typed, got, want)
			}
			seen[reflect.TypeOf(o.typed).String()] = true
		}
	}
	if len(seen) < 10 {
		t.Errorf("only %d kinds compared: %v", len(seen), seen)
	}
}
