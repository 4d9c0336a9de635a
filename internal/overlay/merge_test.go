package overlay

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"sigs.k8s.io/kustomize/api/types"
)

// mergeObjects are objects shaped like a tenant's bundle: nested maps, lists of maps,
// numbers, booleans, empty values.
func mergeObjects() []map[string]any {
	return []map[string]any{
		{"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
			"metadata": map[string]any{"name": "crm", "namespace": "eva-tenant-acmeco",
				"labels":      map[string]any{"eva.aidonow.com/capsule": "ACMECO", "eva.aidonow.com/tier": "Starter"},
				"annotations": map[string]any{"reconcile.fluxcd.io/requestedAt": "eva-spec-01234567"}},
			"spec": map[string]any{"interval": "10m", "releaseName": "crm", "timeout": "5m",
				"chart":   map[string]any{"spec": map[string]any{"chart": "eva-crm", "version": "1.4.0", "sourceRef": map[string]any{"kind": "HelmRepository", "name": "eva-charts"}}},
				"install": map[string]any{"remediation": map[string]any{"retries": int64(3)}},
				"values": map[string]any{"replicaCount": int64(2), "debug": false, "ratio": 0.5, "tenant": map[string]any{"code": "ACMECO"},
					"env": []any{map[string]any{"name": "A", "value": "1"}}, "empty": map[string]any{},
					"secretMounts": []any{map[string]any{"name": "crm-database", "secretName": "acmeco-crm-database", "revision": "94bb06d1fbfff4e8"}}}}},
		{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "eva-tenant-acmeco",
			"labels": map[string]any{"pod-security.kubernetes.io/enforce": "restricted"}}},
		{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": map[string]any{"name": "eva-acmeco", "namespace": "eva-tenant-acmeco"},
			"spec": map[string]any{"ingressClassName": "nginx", "rules": []any{map[string]any{"host": "acmeco.eva.example.com"}}}},
	}
}

// mergePatches are map-only strategic-merge patches (taken by the fast path).
var mergePatches = []string{
	// the prod overlay's
	"apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: any\nspec:\n  driftDetection:\n    mode: enabled\n",
	"metadata:\n  labels:\n    team: platform\n  annotations:\n    a: b\n",
	"spec:\n  values:\n    replicaCount: 3\n    tenant:\n      region: eu\n",
	"spec:\n  interval: {every: 5m}\n",                       // a map replaces a scalar
	"spec:\n  values:\n    env: {name: B}\n",                 // a map replaces a list
	"spec:\n  values:\n    empty: {x: 1}\n",                  // a map merges into an empty map
	"spec:\n  chart:\n    spec:\n      version: \"2.0.0\"\n", // a quoted number stays a string
	"spec:\n  suspend: true\n  timeout: 10m\n",
	"apiVersion: v9\nmetadata:\n  name: x\n  namespace: y\n",
	"metadata:\n  namespace: other\n  labels: {x: \"1\"}\n",
	"spec:\n  values:\n    ratio: 1.5\n    big: 12345678901234\n",
}

func TestMapMergeMatchesKustomize(t *testing.T) {
	for _, body := range mergePatches {
		p, err := ParsePatch("test", body, &types.Selector{})
		if err != nil {
			t.Fatal(err)
		}
		if p.merge == nil {
			t.Errorf("patch not taken by the map merge:\n%s", body)
			continue
		}
		for _, obj := range mergeObjects() {
			assertSameAsKustomize(t, p, obj, body)
		}
	}
	// Patches with a list, a null, an empty map or a directive go through kustomize.
	for _, body := range []string{
		"spec:\n  values:\n    env:\n    - name: B\n",
		"spec:\n  values:\n    debug: null\n",
		"spec:\n  values: {}\n",
		"spec:\n  values:\n    $patch: replace\n    a: 1\n",
	} {
		p, err := ParsePatch("test", body, &types.Selector{})
		if err != nil {
			t.Fatal(err)
		}
		if p.merge != nil {
			t.Errorf("patch wrongly taken by the map merge:\n%s", body)
		}
	}
}

// assertSameAsKustomize applies a map-only patch both ways and compares the results as
// JSON (the form the object is written and sent in), and checks the input is unchanged.
func assertSameAsKustomize(t *testing.T, p *Patch, obj map[string]any, body string) {
	t.Helper()
	before := asJSON(t, obj)
	fast, fastErr := p.Apply(obj)
	if asJSON(t, obj) != before {
		t.Fatalf("the map merge changed its input:\n%s", body)
	}
	slow, slowErr := p.applyStrategicMerge(obj)
	if fastErr != nil || slowErr != nil {
		if fmt.Sprint(fastErr) != fmt.Sprint(slowErr) {
			t.Errorf("patch\n%s\non %s: map merge error %v, kustomize error %v", body, obj["kind"], fastErr, slowErr)
		}
		return
	}
	var a, b any
	_ = json.Unmarshal([]byte(asJSON(t, fast)), &a)
	_ = json.Unmarshal([]byte(asJSON(t, slow)), &b)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("patch\n%s\non %s %s:\nmap merge: %s\nkustomize: %s", body, obj["kind"], before, asJSON(t, fast), asJSON(t, slow))
	}
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// FuzzMapMergeMatchesKustomize: any strategic-merge patch the map merge takes gives the
// same object as kustomize's filter.
func FuzzMapMergeMatchesKustomize(f *testing.F) {
	for _, body := range mergePatches {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		p, err := ParsePatch("fuzz", body, &types.Selector{})
		if err != nil || p.merge == nil {
			return
		}
		for _, obj := range mergeObjects() {
			assertSameAsKustomize(t, p, obj, body)
		}
	})
}
