package chartcheck

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
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

// identityOf is identity() for another capsule code: what Eva derives from the code.
func identityOf(code string) map[string]any {
	lower := strings.ToLower(code)
	return map[string]any{"capsule": map[string]any{
		"code": code, "tier": "Starter", "wave": 1, "namespace": "eva-tenant-" + lower, "host": lower + ".example.com",
		"queues":   map[string]any{"events": "eva-" + code + "-events", "commands": "eva-" + code + "-commands"},
		"subjects": map[string]any{"events": "capsule." + code + ".events", "commands": "capsule." + code + ".commands"},
	}}
}

// TestReleasesDifferingInIdentityShareARender: releases whose values differ only in
// what Eva derives from the capsule code render the chart's templates once, and each
// one's values are still validated against the schema (a code the schema refuses is
// refused even when its group rendered fine).
func TestReleasesDifferingInIdentityShareARender(t *testing.T) {
	c, err := Load(chartsDir)
	if err != nil {
		t.Fatal(err)
	}
	version := localVersion(t, c, "eva-crm")
	for _, code := range []string{"DEVUSR", "OTHERS", "THIRDS"} {
		r := Release{Tenant: code, Module: "crm", Namespace: "eva-tenant-" + strings.ToLower(code), Chart: "eva-crm", Version: version, Values: identityOf(code)}
		if err := c.Check(r); err != nil {
			t.Fatalf("%s: %v", code, err)
		}
	}
	if c.Checks != 3 || c.Renders != 1 {
		t.Errorf("3 releases differing in identity: %d checks, %d renders; want 3 and 1", c.Checks, c.Renders)
	}
	values := identityOf("FOURTH")
	values["capsule"].(map[string]any)["code"] = "fourth"
	err = c.Check(Release{Tenant: "FOURTH", Module: "crm", Namespace: "eva-tenant-fourth", Chart: "eva-crm", Version: version, Values: values})
	if err == nil || !strings.Contains(err.Error(), "/capsule/code") {
		t.Errorf("a code the schema refuses, in a group that rendered: %v", err)
	}
	values = identityOf("FIFTHS")
	values["replicaCount"] = 2
	if err := c.Check(Release{Tenant: "FIFTHS", Module: "crm", Namespace: "eva-tenant-fifths", Chart: "eva-crm", Version: version, Values: values}); err != nil {
		t.Fatal(err)
	}
	if c.Renders != 2 {
		t.Errorf("other values: %d renders, want 2", c.Renders)
	}
}

// TestFailedGroupReportsEachReleaseItsOwnError: when a group's templates fail, each
// release of the group is rendered with its own values, so its error names its own
// identity, never another tenant's.
func TestFailedGroupReportsEachReleaseItsOwnError(t *testing.T) {
	dir := t.TempDir()
	chartDir := filepath.Join(dir, "boom")
	if err := os.MkdirAll(filepath.Join(chartDir, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"Chart.yaml":            "apiVersion: v2\nname: boom\nversion: 0.1.0\n",
		"values.yaml":           "boom: false\n",
		"templates/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n{{- if .Values.boom }}{{ fail (printf \"boom for %s\" .Values.capsule.host) }}{{ end }}\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(chartDir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{"ALPHAA", "BRAVOO"} {
		values := identityOf(code)
		values["boom"] = true
		err := c.Check(Release{Tenant: code, Module: "boom", Namespace: "eva-tenant-" + strings.ToLower(code), Chart: "boom", Version: "0.1.0", Values: values})
		if err == nil || !strings.Contains(err.Error(), "boom for "+strings.ToLower(code)+".example.com") {
			t.Errorf("%s: %v, want its own host in the error", code, err)
		}
	}
}

// TestGroupValuesAreHelmsCoalescing: the values a release of a rendered group is
// validated with (the group's coalesced values with its own identity) are the values
// Helm coalesces for it, for every module chart, with and without overrides of the
// chart's defaults, for other tiers and waves, and for an override under the identity
// key the chart's defaults also have.
func TestGroupValuesAreHelmsCoalescing(t *testing.T) {
	c, err := Load(chartsDir)
	if err != nil {
		t.Fatal(err)
	}
	overrides := []map[string]any{
		nil,
		{"replicaCount": 2, "logLevel": "debug"},
		{"resources": map[string]any{"limits": map[string]any{"cpu": "2"}}},
	}
	for _, m := range modules {
		ch, ok := c.Chart("eva-" + m)
		if !ok {
			t.Fatalf("no chart eva-%s", m)
		}
		for i, extra := range overrides {
			release := func(code, tier string, wave int) Release {
				values := identityOf(code)
				ident := values["capsule"].(map[string]any)
				ident["tier"], ident["wave"] = tier, wave
				for k, v := range extra {
					values[k] = v
				}
				return Release{Tenant: code, Module: m, Namespace: "eva-tenant-" + strings.ToLower(code), Chart: ch.Name(), Version: ch.Metadata.Version, Values: values}
			}
			for _, tw := range []struct {
				tier string
				wave int
			}{{"Starter", 1}, {"Enterprise", 3}} {
				first := release("FIRSTT", tw.tier, tw.wave)
				if _, err := releaseValues(ch, first); err != nil {
					t.Fatalf("%s %d: %v", m, i, err)
				}
				g := newGroup(ch, first)
				for _, code := range []string{"SECOND", "THIRDD"} {
					r := release(code, tw.tier, tw.wave)
					got, ok := g.valuesFor(r)
					if !ok {
						t.Fatalf("%s %d %s: the group's values do not apply", m, i, code)
					}
					want, err := releaseValues(ch, r)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want["Values"].(chartutil.Values).AsMap()) {
						t.Errorf("%s, overrides %d, %s: the group's values with its identity\n%v\nare not Helm's\n%v", m, i, code, got, want["Values"])
					}
				}
			}
		}
	}
}

// TestGroupValuesRefuseAnotherShape: an identity that does not line up with the group's
// first one leaf for leaf is left to Helm's coalescing.
func TestGroupValuesRefuseAnotherShape(t *testing.T) {
	c, err := Load(chartsDir)
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := c.Chart("eva-crm")
	first := Release{Tenant: "FIRSTT", Module: "crm", Namespace: "eva-tenant-firstt", Chart: ch.Name(), Version: ch.Metadata.Version, Values: identityOf("FIRSTT")}
	if _, err := releaseValues(ch, first); err != nil {
		t.Fatal(err)
	}
	g := newGroup(ch, first)
	for name, change := range map[string]func(ident map[string]any){
		"an extra key":      func(ident map[string]any) { ident["extra"] = "x" },
		"a missing key":     func(ident map[string]any) { delete(ident, "host") },
		"a map for a leaf":  func(ident map[string]any) { ident["host"] = map[string]any{"a": "b"} },
		"a leaf for a map":  func(ident map[string]any) { ident["queues"] = "q" },
		"a null leaf":       func(ident map[string]any) { ident["host"] = nil },
		"a list for a leaf": func(ident map[string]any) { ident["host"] = []any{"a"} },
	} {
		values := identityOf("SECOND")
		change(values["capsule"].(map[string]any))
		r := Release{Tenant: "SECOND", Module: "crm", Namespace: "eva-tenant-second", Chart: ch.Name(), Version: ch.Metadata.Version, Values: values}
		if _, ok := g.valuesFor(r); ok {
			t.Errorf("%s: the group's values were used", name)
		}
	}
}

// writeChart writes a chart folder named name under dir from file texts by path.
func writeChart(t *testing.T, dir, name string, files map[string]string) {
	t.Helper()
	for path, text := range files {
		full := filepath.Join(dir, name, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGroupValuesAreHelmsCoalescingUnderIdentityDefaults: a chart whose defaults hold
// more under the identity key than Eva sets (a key of their own, a map beside Eva's
// leaves, a map where Eva sets a leaf, a leaf where Eva sets a map) gets, for a second
// release of a group, the values Helm coalesces for it.
func TestGroupValuesAreHelmsCoalescingUnderIdentityDefaults(t *testing.T) {
	dir := t.TempDir()
	writeChart(t, dir, "defaults", map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: defaults\nversion: 0.1.0\n",
		"values.yaml": "capsule:\n  own: kept\n  host:\n    a: b\n  queues: flat\n" +
			"  subjects:\n    events: default-events\n    extra: default-extra\n  nested:\n    deep: 1\n",
		"values.schema.json":    `{"type": "object", "properties": {"capsule": {"type": "object"}}}`,
		"templates/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
	})
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := c.Chart("defaults")
	release := func(code string) Release {
		return Release{Tenant: code, Module: "defaults", Namespace: "eva-tenant-" + strings.ToLower(code), Chart: "defaults", Version: "0.1.0", Values: identityOf(code)}
	}
	if _, err := releaseValues(ch, release("FIRSTT")); err != nil {
		t.Fatal(err)
	}
	g := newGroup(ch, release("FIRSTT"))
	got, ok := g.valuesFor(release("SECOND"))
	if !ok {
		t.Fatal("the group's values do not apply")
	}
	want, err := releaseValues(ch, release("SECOND"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want["Values"].(chartutil.Values).AsMap()) {
		t.Errorf("the group's values with SECOND's identity\n%v\nare not Helm's\n%v", got, want["Values"])
	}
}

// TestGroupValuesAreTakenBeforeTemplatesRun: a template that changes the values it is
// given (sprig's set) does not change what later releases of its group are validated
// with.
func TestGroupValuesAreTakenBeforeTemplatesRun(t *testing.T) {
	dir := t.TempDir()
	writeChart(t, dir, "setter", map[string]string{
		"Chart.yaml":         "apiVersion: v2\nname: setter\nversion: 0.1.0\n",
		"values.yaml":        "replicas: 1\n",
		"values.schema.json": `{"type": "object", "properties": {"replicas": {"type": "integer", "maximum": 5}}}`,
		"templates/config.yaml": "{{- $_ := set .Values \"replicas\" 99 }}\n{{- $_ := set .Values.capsule \"code\" \"MUTATED\" }}\n" +
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
	})
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{"FIRSTT", "SECOND"} {
		r := Release{Tenant: code, Module: "setter", Namespace: "eva-tenant-" + strings.ToLower(code), Chart: "setter", Version: "0.1.0", Values: identityOf(code)}
		if err := c.Check(r); err != nil {
			t.Fatalf("%s: %v", code, err)
		}
	}
	if len(c.groups) != 1 || c.Renders != 1 {
		t.Fatalf("%d groups, %d renders; want 1 and 1", len(c.groups), c.Renders)
	}
	for _, g := range c.groups {
		if g.values["replicas"] != float64(1) || g.values["capsule"].(map[string]any)["code"] != "FIRSTT" {
			t.Errorf("the group's values were changed by its templates: replicas %v, code %v", g.values["replicas"], g.values["capsule"].(map[string]any)["code"])
		}
	}
}

// TestConcurrentChecksOfOneGroup: releases of one group checked at once (as a render
// checks them, one tenant per core) each get their own verdict; run with -race.
func TestConcurrentChecksOfOneGroup(t *testing.T) {
	c, err := Load(chartsDir)
	if err != nil {
		t.Fatal(err)
	}
	version := localVersion(t, c, "eva-crm")
	codes := []string{"ALPHAA", "BRAVOO", "CHARLI", "DELTAA", "ECHOOO", "FOXTRO", "GOLFFF", "HOTELL"}
	errs := make([]error, len(codes)+1)
	var wg sync.WaitGroup
	for i, code := range append(codes, "lowerc") {
		wg.Add(1)
		go func() {
			defer wg.Done()
			values := identityOf(strings.ToUpper(code))
			values["capsule"].(map[string]any)["code"] = code
			errs[i] = c.Check(Release{Tenant: code, Module: "crm", Namespace: "eva-tenant-" + strings.ToLower(code), Chart: "eva-crm", Version: version, Values: values})
		}()
	}
	wg.Wait()
	for i, code := range codes {
		if errs[i] != nil {
			t.Errorf("%s: %v", code, errs[i])
		}
	}
	if last := errs[len(codes)]; last == nil || !strings.Contains(last.Error(), "/capsule/code") {
		t.Errorf("a code the schema refuses, checked beside its group: %v", last)
	}
}
