package metrics

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	monitoringv1 "github.com/aidonow/eva/internal/monitoring/v1"
)

// TestAlertRulesUseTheOperatorsMetrics reads deploy/monitoring's rules strictly as a
// PrometheusRule and holds each alert to a metric the operator exports: a renamed metric
// would leave an alert that never fires.
func TestAlertRulesUseTheOperatorsMetrics(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "monitoring", "eva-operator-alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rule monitoringv1.PrometheusRule
	if err := yaml.UnmarshalStrict(data, &rule); err != nil {
		t.Fatalf("not a PrometheusRule: %v", err)
	}
	uses := map[string]string{"TenantPublishingTooOften": PublishThrottledName}
	found := 0
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			metric, ok := uses[r.Alert]
			if !ok {
				t.Errorf("alert %s: no metric listed for it in this test", r.Alert)
				continue
			}
			found++
			if !strings.Contains(r.Expr, metric) {
				t.Errorf("alert %s reads %q, not the operator's %s", r.Alert, r.Expr, metric)
			}
		}
	}
	if found != len(uses) {
		t.Errorf("%d of %d alerts found", found, len(uses))
	}
}
