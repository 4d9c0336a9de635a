package chartcheck

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"k8s.io/apimachinery/pkg/util/validation"
	sigsyaml "sigs.k8s.io/yaml"
)

// TestChartsInstallAtADigestVersion: helm-controller installs a chart from an
// OCIRepository at its version with the digest appended as build metadata
// (1.4.0+8bdea696daa9), so that another artifact of the same version is an upgrade.
// Every module chart must render valid labels at such a version: the helm.sh/chart
// label once held the "+", and the API server refused every object of every release.
func TestChartsInstallAtADigestVersion(t *testing.T) {
	c, err := Load(chartsDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range modules {
		t.Run(m, func(t *testing.T) {
			loaded, ok := c.Chart("eva-" + m)
			if !ok {
				t.Fatalf("no chart eva-%s", m)
			}
			meta := *loaded.Metadata
			meta.Version += "+8bdea696daa9"
			ch := *loaded
			ch.Metadata = &meta
			out, err := renderChart(&ch, Release{Tenant: "DEVUSR", Module: m, Namespace: "eva-tenant-devusr", Chart: meta.Name, Version: meta.Version, Values: identity()})
			if err != nil {
				t.Fatal(err)
			}
			checked := 0
			for name, text := range out {
				for _, doc := range strings.Split(text, "\n---") {
					checked += checkLabels(t, name, doc, &ch)
				}
			}
			if checked == 0 {
				t.Fatal("no labels rendered")
			}
		})
	}
}

// checkLabels checks the label values of one rendered document and counts them.
func checkLabels(t *testing.T, name, doc string, ch *chart.Chart) int {
	t.Helper()
	var obj struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := sigsyaml.Unmarshal([]byte(doc), &obj); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for k, v := range obj.Metadata.Labels {
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			t.Errorf("%s at version %s: label %s=%q: %s", name, ch.Metadata.Version, k, v, msgs[0])
		}
	}
	return len(obj.Metadata.Labels)
}
