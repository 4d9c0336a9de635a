package chartcheck

import (
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

const chartsDir = "../../charts"

var modules = []string{"crm", "itsm", "whisper", "forge", "shell", "gateway"}

func identity() map[string]any {
	return map[string]any{"capsule": map[string]any{
		"code": "DEVUSR", "tier": "Starter", "wave": 1, "namespace": "eva-tenant-devusr", "host": "devusr.example.com",
		"queues":   map[string]any{"events": "eva-DEVUSR-events", "commands": "eva-DEVUSR-commands"},
		"subjects": map[string]any{"events": "capsule.DEVUSR.events", "commands": "capsule.DEVUSR.commands"},
	}}
}

func TestChartsLint(t *testing.T) {
	for _, m := range modules {
		t.Run(m, func(t *testing.T) {
			linter := lint.All(filepath.Join(chartsDir, "eva-"+m), identity(), "eva-tenant-devusr", false)
			for _, msg := range linter.Messages {
				if msg.Severity >= support.WarningSev {
					t.Errorf("lint: %s", msg)
				}
			}
		})
	}
}

func TestCheckRendersEveryChart(t *testing.T) {
	c, err := Load(chartsDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range modules {
		r := Release{Tenant: "DEVUSR", Module: m, Namespace: "eva-tenant-devusr", Chart: "eva-" + m, Version: localVersion(t, c, "eva-"+m), Values: identity()}
		if err := c.Check(r); err != nil {
			t.Errorf("%s: %v", m, err)
		}
	}
}

func TestCheckNamesTheFault(t *testing.T) {
	c, err := Load(chartsDir)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		values map[string]any
		want   []string
	}{
		"schema maximum":   {map[string]any{"replicaCount": 100}, []string{"tenant DEVUSR, module crm", "/replicaCount"}},
		"schema type":      {map[string]any{"logLevel": 3}, []string{"/logLevel"}},
		"identity":         {map[string]any{"capsule": map[string]any{"code": "devusr"}}, []string{"/capsule/code"}},
		"missing identity": {map[string]any{"capsule": nil}, []string{"module crm"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			values := identity()
			for k, v := range tc.values {
				if inner, ok := v.(map[string]any); ok {
					for ik, iv := range inner {
						values[k].(map[string]any)[ik] = iv
					}
					continue
				}
				values[k] = v
			}
			err := c.Check(Release{Tenant: "DEVUSR", Module: "crm", Namespace: "eva-tenant-devusr", Chart: "eva-crm", Version: "1.4.0", Values: values})
			if err == nil {
				t.Fatal("bad values accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
	if err := c.Check(Release{Tenant: "DEVUSR", Module: "erp", Chart: "eva-erp"}); err == nil || !strings.Contains(err.Error(), "eva-erp not found") {
		t.Errorf("unknown chart: %v", err)
	}
}

func localVersion(t *testing.T, c *Checker, chart string) string {
	t.Helper()
	ch, ok := c.Chart(chart)
	if !ok {
		t.Fatalf("no chart %s", chart)
	}
	return ch.Metadata.Version
}
