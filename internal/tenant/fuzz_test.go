package tenant

import (
	"encoding/json"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// FuzzValidateTenant feeds arbitrary field values through the semantic validator: it
// must never panic, and a tenant it accepts must satisfy the API's basic rules.
func FuzzValidateTenant(f *testing.F) {
	f.Add("DEVUSR", "Starter", "crm", "1.4.0", `{"replicaCount":1}`, "crm", "crm-db", int32(1))
	f.Add("devusr", "Gold", "forge", "latest", `{"db":{"password":"x"}}`, "nope", "Crm_DB", int32(9))
	f.Add("GLOBEX", "Enterprise", "shell", "v2.1.0-rc.1+b5", `[1,2]`, "shell", "x.y", int32(3))
	f.Add("GLOBEX", "Enterprise", "gateway", "2.0.0", `{"secretMounts":[{"name":"x","secretName":"acmeco-db"}]}`, "gateway", "gateway-tls", int32(2))
	f.Add("ACMECO", "Customer", "", "", `null`, "", "", int32(0))
	f.Fuzz(func(t *testing.T, code, tier, module, version, values, mountModule, mountSecret string, wave int32) {
		tn := &evav1.EvaTenant{
			TypeMeta:   metav1.TypeMeta{APIVersion: evav1.GroupVersion.String(), Kind: evav1.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: "fuzz"},
			Spec: evav1.EvaTenantSpec{
				CapsuleCode: code, Tier: evav1.Tier(tier), Wave: wave,
				Versions:     map[string]evav1.ModuleVersion{module: evav1.ModuleVersion(version)},
				HelmValues:   map[string]apiextensionsv1.JSON{module: {Raw: []byte(values)}},
				SecretMounts: []evav1.SecretMount{{Module: mountModule, Secret: mountSecret}},
			},
		}
		errs := DefaultCatalog().Validate(tn)
		if len(errs) > 0 {
			return
		}
		if !capsuleCodeRE.MatchString(code) || wave < 0 || wave > 3 || !semverRE.MatchString(version) {
			t.Fatalf("accepted an invalid tenant: %+v", tn.Spec)
		}
		var v map[string]any
		if json.Unmarshal([]byte(values), &v) != nil {
			t.Fatalf("accepted helmValues that are not an object: %q", values)
		}
		// What validate accepts, evactl diff prints unredacted: the two must agree.
		if r := SecretReason("values", v); r != "" {
			t.Fatalf("accepted values SecretReason refuses (%s): %q", r, values)
		}
		for k := range v {
			if f := FoldKey(k); f == "image" || f == ReservedValuesKey || f == FoldKey(SecretMountsValuesKey) {
				t.Fatalf("accepted platform-owned key %q", k)
			}
		}
		if !DefaultCatalog().TierHasModule(tn.Spec.Tier, mountModule) || len(mountSecret) > 32 || !secretNameRE.MatchString(mountSecret) {
			t.Fatalf("accepted an invalid secret mount: %+v", tn.Spec.SecretMounts)
		}
	})
}

// FuzzSecretReason checks invariants of the secret detector: a reason never holds the
// value, a secret stays a secret when nested in a map or list, and numbers and booleans
// under keys that are not secret-like are never refused.
func FuzzSecretReason(f *testing.F) {
	for _, seed := range [][2]string{
		{"password", "hunter2"}, {"url", "postgres://admin:hunter2@db:5432/x"}, {"tag", "1.4.0"},
		{"pаssword", "x"}, {"data", "c2VjcmV0LWRhdGEtdGhhdC1zaG91bGQtbm90LWJlLWhlcmUtMTIzNDU2Nzg5MA=="},
		{"keyFile", "/etc/tls/key.pem"}, {"existingSecret", "crm-db"}, {"auth", jwt}, {"key", pem},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, key, value string) {
		r := SecretReason(key, value)
		if len(value) >= 6 && strings.Contains(r, value) {
			t.Fatalf("reason %q holds the value", r)
		}
		inMap := SecretReason("x", map[string]any{key: value})
		inList := SecretReason(key, []any{value})
		if (r == "") != (inMap == "") || (r == "") != (inList == "") {
			t.Fatalf("nesting changes the verdict: %q alone, %q in a map, %q in a list", r, inMap, inList)
		}
		if !LooksLikeSecret(key) {
			for _, v := range []any{3.0, 84736251.0, true, nil} {
				if classifyKey(key).kind == keyPlain && SecretReason(key, v) != "" {
					t.Fatalf("%v refused under a plain key", v)
				}
			}
		}
		if FoldKey(FoldKey(key)) != FoldKey(key) {
			t.Fatalf("FoldKey is not idempotent on %q", key)
		}
	})
}
