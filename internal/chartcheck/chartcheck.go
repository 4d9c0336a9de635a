// Package chartcheck renders module charts with the Helm v3 SDK, in memory, to prove
// that the values Eva gives a release satisfy the chart's schema and templates before
// anything is published.
package chartcheck

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/aidonow/eva/internal/chartrepo"
	"github.com/aidonow/eva/internal/tenant"
)

// Checker verifies releases against the module charts: the versions the chart source
// offers (the charts folder's published.yaml, or the folder's own versions when it has
// none), each rendered from exactly the archive of the version pinned.
type Checker struct {
	// local are the charts of the folder; each is packaged (as `evactl charts push`
	// packages it) only to compare it with its published digest.
	local map[string]*chartrepo.Folder
	// published lists the versions pushed to the chart source (nil: no published.yaml).
	published *chartrepo.Lock
	lockPath  string
	fetch     Fetcher

	mu sync.Mutex
	// resolved remembers each chart version looked up (by name@version).
	resolved map[string]resolution
	// groups remembers the templates already rendered (by templateKey), so a fleet
	// whose tenants share values up to their identity renders each set once.
	groups map[string]*group
	// Renders counts template renders, Checks counts releases checked (each one's
	// values validated against the chart's schema).
	Renders, Checks int
}

type resolution struct {
	chart *chart.Chart
	err   error
}

// Fetcher returns the archive of a published chart version that the charts folder does
// not hold (pulled from the environment's chart source). The checker verifies its
// digest.
type Fetcher func(chart string, p chartrepo.Published) ([]byte, error)

// MissingVersionError says a release pins a chart version the chart source does not
// offer.
type MissingVersionError struct {
	Chart, Version string
	// Offered are the versions there are; From says where they were read.
	Offered []string
	From    string
}

func (e *MissingVersionError) Error() string {
	offered := "none"
	if len(e.Offered) > 0 {
		offered = strings.Join(e.Offered, ", ")
	}
	return fmt.Sprintf("chart %s has no version %s (versions: %s; from %s)", e.Chart, e.Version, offered, e.From)
}

// Load reads every chart folder (holding a Chart.yaml) directly under dir, and the
// published versions (dir/published.yaml) when the folder has them. Each of the
// fallback folders adds the charts dir does not hold by name (a fleet's own charts
// before the ones its Eva release carries); dir may then be absent.
func Load(dir string, fallback ...string) (*Checker, error) {
	c := &Checker{local: map[string]*chartrepo.Folder{}, resolved: map[string]resolution{}, groups: map[string]*group{}}
	for i, d := range append([]string{dir}, fallback...) {
		if _, err := os.Stat(d); i == 0 && len(fallback) > 0 && errors.Is(err, fs.ErrNotExist) {
			continue
		}
		folders, err := chartrepo.LoadFolders(d)
		if err != nil {
			return nil, err
		}
		for _, f := range folders {
			if _, ok := c.local[f.Chart.Name()]; !ok {
				c.local[f.Chart.Name()] = f
			}
		}
	}
	c.lockPath = filepath.Join(dir, chartrepo.LockFile)
	var err error
	if c.published, err = chartrepo.ReadLockIfPresent(c.lockPath); err != nil {
		return nil, err
	}
	return c, nil
}

// Published is the charts folder's published.yaml (nil without one): the digests the
// rendered chart sources pin.
func (c *Checker) Published() *chartrepo.Lock { return c.published }

// SetFetcher lets the checker pull published versions the charts folder does not hold.
func (c *Checker) SetFetcher(f Fetcher) { c.fetch = f }

// Chart returns a loaded chart of the folder by name.
func (c *Checker) Chart(name string) (*chart.Chart, bool) {
	f, ok := c.local[name]
	if !ok {
		return nil, false
	}
	return f.Chart, true
}

// chartFor returns the chart of exactly the version given, once per version.
func (c *Checker) chartFor(name, version string) (*chart.Chart, error) {
	key := name + "@" + chartrepo.NormalVersion(version)
	c.mu.Lock()
	r, ok := c.resolved[key]
	c.mu.Unlock()
	if ok {
		return r.chart, r.err
	}
	ch, err := c.resolve(name, version)
	c.mu.Lock()
	c.resolved[key] = resolution{ch, err}
	c.mu.Unlock()
	return ch, err
}

func (c *Checker) resolve(name, version string) (*chart.Chart, error) {
	local, hasLocal := c.local[name]
	sameAsLocal := hasLocal && chartrepo.NormalVersion(local.Chart.Metadata.Version) == chartrepo.NormalVersion(version)
	if c.published == nil {
		if !hasLocal {
			return nil, fmt.Errorf("chart %s not found among the local charts", name)
		}
		if !sameAsLocal {
			return nil, &MissingVersionError{Chart: name, Version: version, Offered: []string{local.Chart.Metadata.Version},
				From: "the charts folder, which has no " + chartrepo.LockFile}
		}
		return local.Chart, nil
	}
	p, ok := c.published.Find(name, version)
	if !ok && !hasLocal && len(c.published.Versions(name)) == 0 {
		return nil, fmt.Errorf("chart %s not found among the local charts nor in %s", name, c.lockPath)
	}
	if !ok {
		return nil, &MissingVersionError{Chart: name, Version: version, Offered: c.published.Versions(name), From: c.lockPath}
	}
	if sameAsLocal {
		a, err := local.Package()
		if err != nil {
			return nil, err
		}
		if a.Digest != p.Archive {
			return nil, fmt.Errorf("%s is version %s but packages to %s, not the published %s: raise its version in Chart.yaml (published versions are immutable)",
				a.Dir, a.Version, a.Digest, p.Archive)
		}
		return local.Chart, nil
	}
	if c.fetch == nil {
		return nil, fmt.Errorf("chart %s %s is published (%s), but the charts folder holds another version and the environment names no chartSource.url to pull it from",
			name, version, p.Archive)
	}
	data, err := c.fetch(name, p)
	if err != nil {
		return nil, fmt.Errorf("chart %s %s: %w", name, version, err)
	}
	a, err := chartrepo.Load(data, name, version)
	if err != nil {
		return nil, err
	}
	if a.Digest != p.Archive {
		return nil, fmt.Errorf("chart %s %s: fetched archive %s, published %s", name, version, a.Digest, p.Archive)
	}
	return a.Chart, nil
}

// Release describes one HelmRelease to check.
type Release struct {
	Tenant, Module, Namespace string
	Chart, Version            string
	// Digest, for a release whose chart source is pinned by digest, is that OCI
	// manifest's digest: it must be the one published.yaml records for Version.
	Digest string
	Values map[string]any
}

// Check renders the release's chart with its values. A schema violation or a template
// error is returned naming the tenant, the module and the value path at fault. Values
// an environment patch takes from the cluster (valuesFrom) are not known at render time
// and are not checked; tenants cannot add such references.
func (c *Checker) Check(r Release) error {
	if r.Digest != "" {
		if published, _ := c.published.Digest(r.Chart, r.Version); published != r.Digest {
			return wrap(r, fmt.Errorf("chart %s %s: its source pins %s, but %s records %q", r.Chart, r.Version, r.Digest, c.lockPath, published))
		}
	}
	return wrap(r, c.check(r))
}

// check verifies one release and returns the unwrapped failure (a *schemaError or
// *templateError when the values are at fault).
//
// Every release's own values are validated against the chart's schema. The templates
// are rendered once per distinct chart, release name and values up to the capsule
// identity (templateKey): a fleet's releases differ mostly in what Eva derives from
// each tenant's validated code (namespace, host, stream and subject names), and
// rendering every one of them made verification five times the render. A release
// whose group failed is rendered with its own values, so its error is its own. A
// release of a group that rendered is validated against the schema with the group's
// coalesced values and its own identity (group.valuesFor); when that does not apply or
// finds a fault, Helm's own coalescing and error decide.
func (c *Checker) check(r Release) error {
	ch, err := c.chartFor(r.Chart, r.Version)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.Checks++
	c.mu.Unlock()
	key, err := templateKey(r)
	if err != nil {
		return fmt.Errorf("values: %w", err)
	}
	c.mu.Lock()
	g := c.groups[key]
	c.mu.Unlock()
	rendered := g != nil && g.err == nil
	if rendered {
		if values, ok := g.valuesFor(r); ok && validateValues(ch, values) == nil {
			return nil
		}
	}
	rv, err := releaseValues(ch, r)
	if err != nil {
		return err
	}
	if rendered {
		return nil
	}
	g = newGroup(ch, r)
	_, g.err = renderTemplates(ch, rv)
	err = g.err
	c.mu.Lock()
	if c.groups[key] == nil {
		c.groups[key] = g
	}
	c.Renders++
	c.mu.Unlock()
	return err
}

// templateKey identifies what a release's templates are rendered from, up to the
// capsule identity: chart, version, release name and values, with the identity
// (values.capsule) cut down to the tier and wave. The rest of the identity, and the
// release namespace, Eva derives from the tenant's six-letter code; they are strings
// of the same form for every tenant.
func templateKey(r Release) (string, error) {
	values := r.Values
	if ident, ok := values[tenant.ReservedValuesKey].(map[string]any); ok {
		values = make(map[string]any, len(r.Values))
		for k, v := range r.Values {
			values[k] = v
		}
		values[tenant.ReservedValuesKey] = map[string]any{"tier": ident["tier"], "wave": ident["wave"]}
	}
	raw, err := json.Marshal(values)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return r.Chart + "@" + chartrepo.NormalVersion(r.Version) + "@" + r.Module + "@" + string(sum[:]), nil
}

func wrap(r Release, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("tenant %s, module %s (chart %s %s): %w", r.Tenant, r.Module, r.Chart, r.Version, err)
}

// Render renders a release's chart and returns its manifests by template name.
func (c *Checker) Render(r Release) (map[string]string, error) {
	ch, err := c.chartFor(r.Chart, r.Version)
	if err != nil {
		return nil, err
	}
	return renderChart(ch, r)
}

func renderChart(ch *chart.Chart, r Release) (map[string]string, error) {
	rv, err := releaseValues(ch, r)
	if err != nil {
		return nil, err
	}
	return renderTemplates(ch, rv)
}

// releaseValues composes what the chart's templates see for a release, its values
// validated against the chart's schema.
func releaseValues(ch *chart.Chart, r Release) (chartutil.Values, error) {
	// Values pass through JSON so the chart sees what Flux will give Helm.
	values := map[string]any{}
	raw, _ := json.Marshal(r.Values)
	if err := json.Unmarshal(raw, &values); err != nil {
		return nil, err
	}
	opts := chartutil.ReleaseOptions{Name: r.Module, Namespace: r.Namespace, Revision: 1, IsInstall: true}
	rv, err := renderValues(ch, values, opts)
	if err != nil {
		return nil, &schemaError{fmt.Errorf("values do not satisfy values.schema.json:%s", indentErr(err))}
	}
	return rv, nil
}

// renderTemplates renders a chart's templates and checks that each document is YAML.
func renderTemplates(ch *chart.Chart, rv chartutil.Values) (map[string]string, error) {
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

// ReleasesIn finds the Flux HelmReleases among rendered objects, with the chart each
// installs: its chart template's, or (chartRef) that of the OCIRepository among the
// objects it names: the chart the URL ends in, at the digest or tag it pins.
func ReleasesIn(tenant string, objects []map[string]any) []Release {
	sources := map[string]map[string]any{}
	for _, obj := range objects {
		if obj["kind"] == "OCIRepository" {
			name, _ := nested(obj, "metadata", "name").(string)
			sources[name], _ = obj["spec"].(map[string]any)
		}
	}
	var out []Release
	for _, obj := range objects {
		if obj["kind"] != "HelmRelease" {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		spec, _ := obj["spec"].(map[string]any)
		values, _ := spec["values"].(map[string]any)
		name, _ := meta["name"].(string)
		ns, _ := meta["namespace"].(string)
		rel := Release{Tenant: tenant, Module: name, Namespace: ns, Values: values}
		if ref, ok := spec["chartRef"].(map[string]any); ok {
			source, _ := ref["name"].(string)
			src := sources[source]
			url, _ := src["url"].(string)
			rel.Chart = url[strings.LastIndex(url, "/")+1:]
			rel.Digest, _ = nested(src, "ref", "digest").(string)
			tag, _ := nested(src, "ref", "tag").(string)
			rel.Version = strings.ReplaceAll(tag, "_", "+")
		} else {
			chartSpec, _ := nested(spec, "chart", "spec").(map[string]any)
			rel.Chart, _ = chartSpec["chart"].(string)
			rel.Version, _ = chartSpec["version"].(string)
		}
		out = append(out, rel)
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

// HasVersion reports, as an error, when the version of a chart cannot be had: neither
// the charts folder nor the chart source holds it.
func (c *Checker) HasVersion(name, version string) error {
	_, err := c.chartFor(name, version)
	return err
}
