package render

import (
	"bytes"
	"testing"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/manifest"
)

// TestTypedEncodingMatchesPlain checks the fast typed encoder against the plain one
// (typed → map → YAML) on every object of every tier and on varied tenants: both
// must write the same bytes.
func TestTypedEncodingMatchesPlain(t *testing.T) {
	r := renderer(t)
	tenants := append(syntheticTenants(40),
		tenantFor("ACMECO", withTier(evav1.TierCustomer), withSecretValues("crm", "db"), withPin("whisper", "0.9.1")),
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
