package treediff

import (
	"slices"
	"strings"
	"testing"
)

// TestObjectSummary: a changed file is reported object by object, with the fields that
// differ; Eva's bookkeeping annotations apart; secrets redacted (a container named as a
// secret as one value); objects added and removed named.
func TestObjectSummary(t *testing.T) {
	old := `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: crm
  namespace: eva-tenant-acmeco
  annotations:
    eva.aidonow.com/spec-digest: sha256:aaaa
spec:
  values:
    replicaCount: 3
    password: hunter2
    credentials: {user: admin, key: k1}
    env: [a, b]
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: gone
  namespace: eva-tenant-acmeco
`
	new := strings.NewReplacer("replicaCount: 3", "replicaCount: 4", "sha256:aaaa", "sha256:bbbb", "hunter2", "hunter3",
		"key: k1", "key: k2", "[a, b]", "[a, c]", "name: gone", "name: come").Replace(old)
	redact := func(key string, _ any) string {
		if key == "password" || key == "credentials" {
			return "a secret"
		}
		return ""
	}
	r := Compare(map[string][]byte{"tenants/acmeco/workloads/manifests.yaml": []byte(old)},
		map[string][]byte{"tenants/acmeco/workloads/manifests.yaml": []byte(new)},
		func(p string) string { return strings.Split(p, "/")[1] }, redact)
	var got []string
	for _, o := range r.Objects {
		line := o.Tenant + " " + o.Status + " " + o.Object
		for _, f := range o.Fields {
			line += " | " + f.Field + ": " + f.Old + " → " + f.New
		}
		for _, f := range o.Bookkeeping {
			line += " | bookkeeping " + f.Field + ": " + f.Old + " → " + f.New
		}
		got = append(got, line)
	}
	want := []string{
		"ACMECO added ConfigMap eva-tenant-acmeco/come",
		"ACMECO removed ConfigMap eva-tenant-acmeco/gone",
		`ACMECO changed HelmRelease eva-tenant-acmeco/crm` +
			` | spec.values.credentials: <redacted: a secret> (redacted) → <redacted: a secret> (redacted, changed)` +
			` | spec.values.env[1]: b → c` +
			` | spec.values.password: <redacted: a secret> (redacted) → <redacted: a secret> (redacted, changed)` +
			` | spec.values.replicaCount: 3 → 4` +
			` | bookkeeping metadata.annotations["eva.aidonow.com/spec-digest"]: "sha256:aaaa" → "sha256:bbbb"`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("objects:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, secret := range []string{"hunter", "admin", "k1", "k2"} {
		for _, o := range r.Objects {
			for _, f := range append(o.Fields, o.Bookkeeping...) {
				if strings.Contains(f.Old+f.New, secret) {
					t.Errorf("%s shown in %+v", secret, f)
				}
			}
		}
	}
}
