// Package chartcheck renders module charts with the Helm v3 SDK, in memory, to prove
// that the values Eva gives a release satisfy the chart's schema and templates before
// anything is published.
package chartcheck

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	sigsyaml "sigs.k8s.io/yaml"
)

// Checker verifies releases against the charts of one folder.
type Checker struct {
	charts map[string]*chart.Chart

	mu sync.Mutex
	// verified remembers value sets already rendered (by chart and values digest), so
	// a fleet whose tenants share values renders each distinct set once.
	verified map[string]error
	// Renders counts templates rendered, Checks counts releases checked.
	Renders, Checks int
}

// Load reads every chart folder (holding a Chart.yaml) directly under dir.
func Load(dir string) (*Checker, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading charts: %w", err)
	}
	c := &Checker{charts: map[string]*chart.Chart{}, verified: map[string]error{}}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(path, "Chart.yaml")); !e.IsDir() || err != nil {
			continue
		}
		ch, err := loader.LoadDir(path)
		if err != nil {
			return nil, fmt.Errorf("loading chart %s: %w", path, err)
		}
		c.charts[ch.Name()] = ch
	}
	if len(c.charts) == 0 {
		return nil, fmt.Errorf("no charts found in %s", dir)
	}
	return c, nil
}

// Chart returns a loaded chart by name.
func (c *Checker) Chart(name string) (*chart.Chart, bool) {
	ch, ok := c.charts[name]
	return ch, ok
}

// Release describes one HelmRelease to check.
type Release struct {
	Tenant, Module, Namespace string
	Chart, Version            string
	Values                    map[string]any
}

// Check renders the release's chart with its values. A schema violation or a template
// error is returned naming the tenant, the module and the value path at fault. Values
// from valuesFrom references are not known at render time and are not checked.
func (c *Checker) Check(r Release) error {
	return wrap(r, c.check(r))
}

// check renders a release's chart once per distinct chart and values, and returns the
// unwrapped failure (a *schemaError or *templateError when the values are at fault).
func (c *Checker) check(r Release) error {
	ch, ok := c.charts[r.Chart]
	if !ok {
		return fmt.Errorf("chart %s not found among the local charts", r.Chart)
	}
	raw, err := json.Marshal(r.Values)
	if err != nil {
		return fmt.Errorf("values: %w", err)
	}
	sum := sha256.Sum256(raw)
	key := r.Chart + "@" + string(sum[:])
	c.mu.Lock()
	c.Checks++
	prev, seen := c.verified[key]
	c.mu.Unlock()
	if seen {
		return prev
	}
	err = render(ch, r)
	c.mu.Lock()
	c.verified[key] = err
	c.Renders++
	c.mu.Unlock()
	return err
}

func wrap(r Release, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("tenant %s, module %s (chart %s %s): %w", r.Tenant, r.Module, r.Chart, r.Version, err)
}

// Render renders a release's chart and returns its manifests by template name.
func (c *Checker) Render(r Release) (map[string]string, error) {
	ch, ok := c.charts[r.Chart]
	if !ok {
		return nil, fmt.Errorf("chart %s not found among the local charts", r.Chart)
	}
	return renderChart(ch, r)
}

func render(ch *chart.Chart, r Release) error {
	_, err := renderChart(ch, r)
	return err
}

func renderChart(ch *chart.Chart, r Release) (map[string]string, error) {
	// Values pass through JSON so the chart sees what Flux will give Helm.
	values := map[string]any{}
	raw, _ := json.Marshal(r.Values)
	if err := json.Unmarshal(raw, &values); err != nil {
		return nil, err
	}
	opts := chartutil.ReleaseOptions{Name: r.Module, Namespace: r.Namespace, Revision: 1, IsInstall: true}
	rv, err := chartutil.ToRenderValues(ch, values, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, &schemaError{fmt.Errorf("values do not satisfy values.schema.json:%s", indentErr(err))}
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		return nil, &templateError{fmt.Errorf("template error: %w", err)}
	}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") || strings.TrimSpace(out[name]) == "" {
			continue
		}
		for _, doc := range strings.Split(out[name], "\n---") {
			var obj map[string]any
			if err := sigsyaml.Unmarshal([]byte(doc), &obj); err != nil {
				return nil, &templateError{fmt.Errorf("%s renders invalid YAML: %w", name, err)}
			}
		}
	}
	return out, nil
}

// indentErr puts each line of a multi-line Helm error on its own indented line.
func indentErr(err error) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(err.Error()), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasSuffix(line, "values don't meet the specifications of the schema(s) in the following chart(s):") {
			continue
		}
		b.WriteString("\n    " + line)
	}
	return b.String()
}

// ReleasesIn finds the Flux HelmReleases among rendered objects.
func ReleasesIn(tenant string, objects []map[string]any) []Release {
	var out []Release
	for _, obj := range objects {
		if obj["kind"] != "HelmRelease" {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		spec, _ := obj["spec"].(map[string]any)
		chartSpec, _ := nested(spec, "chart", "spec").(map[string]any)
		values, _ := spec["values"].(map[string]any)
		name, _ := meta["name"].(string)
		ns, _ := meta["namespace"].(string)
		chartName, _ := chartSpec["chart"].(string)
		version, _ := chartSpec["version"].(string)
		out = append(out, Release{Tenant: tenant, Module: name, Namespace: ns, Chart: chartName, Version: version, Values: values})
	}
	return out
}

func nested(m map[string]any, keys ...string) any {
	var cur any = m
	for _, k := range keys {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[k]
	}
	return cur
}
