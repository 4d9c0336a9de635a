package treediff

import (
	"slices"
	"strings"
	"testing"

	"github.com/aidonow/eva/internal/tenant"
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

// TestObjectSummaryRedactsEachValue: one secret-looking value in a release hides itself,
// never its neighbours: a replicaCount change beside a token is shown, the token's own
// change is said without its value. Seen failing before: the whole object was one
// "<redacted …> (redacted, changed)".
func TestObjectSummaryRedactsEachValue(t *testing.T) {
	old := `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: crm
  namespace: eva-tenant-globex
spec:
  values:
    replicaCount: 2
    secretMounts:
      - name: db
        secretName: globex-db
        revision: 0f3a9c2e71b4d856
    integrations:
      githubToken: ghp_0123456789abcdefghijABCDEFGHIJ012345
      region: eu
`
	new := strings.NewReplacer("replicaCount: 2", "replicaCount: 3", "region: eu", "region: us",
		"ghp_0123456789abcdefghijABCDEFGHIJ012345", "ghp_9876543210abcdefghijABCDEFGHIJ012345").Replace(old)
	r := Compare(map[string][]byte{"tenants/globex/workloads/manifests.yaml": []byte(old)},
		map[string][]byte{"tenants/globex/workloads/manifests.yaml": []byte(new)},
		func(p string) string { return strings.Split(p, "/")[1] }, tenant.SecretReason)
	if len(r.Objects) != 1 {
		t.Fatalf("objects %+v, want the release", r.Objects)
	}
	got := map[string]string{}
	for _, f := range r.Objects[0].Fields {
		got[f.Field] = f.Old + " → " + f.New
	}
	want := map[string]string{
		"spec.values.replicaCount":             "2 → 3",
		"spec.values.integrations.region":      "eu → us",
		"spec.values.integrations.githubToken": "",
	}
	for field, change := range want {
		c, ok := got[field]
		switch {
		case !ok:
			t.Errorf("field %s not shown; fields %v", field, got)
		case change != "" && c != change:
			t.Errorf("field %s: %s, want %s", field, c, change)
		case change == "" && (!strings.Contains(c, "<redacted") || strings.Contains(c, "ghp_")):
			t.Errorf("field %s: %s, want it redacted", field, c)
		}
	}
	if len(got) != len(want) {
		t.Errorf("fields %v, want only %v", got, want)
	}
}
