package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestChartDayTwoKnobs: the scheduling and metadata values reach every operator
// Deployment's pods (shards included) and the ServiceAccount; the PodDisruptionBudget
// and the ServiceMonitor, when enabled, select what they must; values of the wrong shape
// are refused by the schema.
func TestChartDayTwoKnobs(t *testing.T) {
	chrt := loadChart(t)
	tolerations := []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "platform", "effect": "NoSchedule"}}
	affinity := map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{
			map[string]any{"key": "kubernetes.io/arch", "operator": "In", "values": []any{"amd64"}}}}}}}}
	spread := []any{map[string]any{"maxSkew": int64(1), "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/part-of": "eva-operator"}}}}
	got := helmObjects(t, chrt, map[string]any{
		"shards":                    []any{"a"},
		"nodeSelector":              map[string]any{"node-role.kubernetes.io/platform": ""},
		"tolerations":               tolerations,
		"affinity":                  affinity,
		"topologySpreadConstraints": spread,
		"priorityClassName":         "platform-critical",
		"podAnnotations":            map[string]any{"example.com/team": "platform"},
		"podLabels":                 map[string]any{"example.com/cost-centre": "42"},
		"imagePullSecrets":          []any{map[string]any{"name": "ghcr"}},
		"serviceAccount":            map[string]any{"annotations": map[string]any{"iam.example.com/role": "eva"}},
		"podDisruptionBudget":       map[string]any{"enabled": true},
		"serviceMonitor":            map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
	})
	for _, name := range []string{"eva-operator", "eva-operator-shard-a"} {
		d := got["apps/v1/Deployment/eva-system/"+name]
		spec, _, _ := unstructured.NestedMap(d, "spec", "template", "spec")
		for field, want := range map[string]any{
			"nodeSelector": map[string]any{"node-role.kubernetes.io/platform": ""}, "tolerations": tolerations, "affinity": affinity,
			"topologySpreadConstraints": spread, "priorityClassName": "platform-critical",
			"imagePullSecrets": []any{map[string]any{"name": "ghcr"}},
		} {
			if !sameJSON(spec[field], want) {
				t.Errorf("%s: pod spec %s = %v, want %v", name, field, spec[field], want)
			}
		}
		labels, _, _ := unstructured.NestedStringMap(d, "spec", "template", "metadata", "labels")
		annotations, _, _ := unstructured.NestedStringMap(d, "spec", "template", "metadata", "annotations")
		if labels["example.com/cost-centre"] != "42" || labels["app.kubernetes.io/name"] != name || labels["app.kubernetes.io/part-of"] != "eva-operator" {
			t.Errorf("%s: pod labels %v", name, labels)
		}
		if annotations["example.com/team"] != "platform" || annotations["eva.aidonow.com/operator-version"] == "" {
			t.Errorf("%s: pod annotations %v", name, annotations)
		}
		pdb := got["policy/v1/PodDisruptionBudget/eva-system/"+name]
		sel, _, _ := unstructured.NestedStringMap(pdb, "spec", "selector", "matchLabels")
		if min, _, _ := unstructured.NestedFieldNoCopy(pdb, "spec", "minAvailable"); !maps.Equal(sel, map[string]string{"app.kubernetes.io/name": name}) || fmt.Sprint(min) != "1" {
			t.Errorf("%s: PodDisruptionBudget %v", name, pdb)
		}
	}
	sa, _, _ := unstructured.NestedStringMap(got["v1/ServiceAccount/eva-system/eva-operator"], "metadata", "annotations")
	if sa["iam.example.com/role"] != "eva" {
		t.Errorf("ServiceAccount annotations %v", sa)
	}
	sm := got["monitoring.coreos.com/v1/ServiceMonitor/eva-system/eva-operator"]
	svcLabels, _, _ := unstructured.NestedStringMap(got["v1/Service/eva-system/eva-operator-metrics"], "metadata", "labels")
	smSel, _, _ := unstructured.NestedStringMap(sm, "spec", "selector", "matchLabels")
	endpoints, _, _ := unstructured.NestedSlice(sm, "spec", "endpoints")
	if len(endpoints) != 1 || len(smSel) == 0 {
		t.Fatalf("ServiceMonitor %v", sm)
	}
	for k, v := range smSel {
		if svcLabels[k] != v {
			t.Errorf("the ServiceMonitor selects %v; the metrics Service is labelled %v", smSel, svcLabels)
		}
	}
	ep := endpoints[0].(map[string]any)
	if ep["port"] != "https-metrics" || ep["scheme"] != "https" || ep["bearerTokenFile"] == nil {
		t.Errorf("ServiceMonitor endpoint %v: want https-metrics over HTTPS with the pod's token", ep)
	}
	if l, _, _ := unstructured.NestedString(sm, "metadata", "labels", "release"); l != "prometheus" {
		t.Errorf("ServiceMonitor labels: release %q", l)
	}
	// Off by default: the chart renders what base/ does (TestChartRendersWhatBaseDoes).
	for key := range helmObjects(t, chrt, map[string]any{}) {
		if strings.Contains(key, "PodDisruptionBudget") || strings.Contains(key, "ServiceMonitor") {
			t.Errorf("rendered by default: %s", key)
		}
	}
	for name, values := range map[string]map[string]any{
		"a pull secret as a string":   {"imagePullSecrets": []any{"ghcr"}},
		"a label the chart sets":      {"podLabels": map[string]any{"app.kubernetes.io/name": "x"}},
		"an interval that is not one": {"serviceMonitor": map[string]any{"enabled": true, "interval": "often"}},
		"an unknown PDB field":        {"podDisruptionBudget": map[string]any{"maxUnavailable": 1}},
	} {
		if _, err := render(chrt, values); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}

func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}
