package metrics

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDashboardUsesTheOperatorsMetrics reads deploy/monitoring's Grafana dashboard and
// holds every query to metrics the operator exports: Eva's own by their names here (a
// renamed metric would leave an empty panel), every one of them on some panel, and the
// few controller-runtime and Go runtime metrics it also reads.
func TestDashboardUsesTheOperatorsMetrics(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "monitoring", "eva-operator-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	ours := []string{QueueDepthName, ConditionSecondsName, TenantsName, RenderSecondsName, PublishSecondsName,
		PublishRetriesName, RolloutUpdatedName, RolloutTotalName, RolloutHaltedName, PublishThrottledName, APIWritesName}
	others := []string{"controller_runtime_reconcile_total", "workqueue_depth", "workqueue_queue_duration_seconds",
		"process_resident_memory_bytes", "go_memstats_heap_inuse_bytes", "process_cpu_seconds_total"}
	metricRE := regexp.MustCompile(`\b([a-z_]+_[a-z_]+)(\{|\[|\)|\s|$)`)
	functions := []string{"histogram_quantile", "by", "sum", "rate", "topk", "vector", "or"}
	used := map[string]bool{}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			for _, m := range metricRE.FindAllStringSubmatch(target.Expr, -1) {
				name := m[1]
				if slices.Contains(functions, name) || strings.HasPrefix(name, "histogram_") {
					continue
				}
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
				switch {
				case slices.Contains(ours, base):
					used[base] = true
				case slices.Contains(others, base):
				default:
					t.Errorf("panel %q reads %s, which the operator does not export", p.Title, name)
				}
			}
		}
	}
	for _, name := range ours {
		if !used[name] {
			t.Errorf("no panel shows %s", name)
		}
	}
	if dash.UID == "" || len(dash.Panels) < 10 {
		t.Errorf("dashboard uid %q, %d panels", dash.UID, len(dash.Panels))
	}
}
