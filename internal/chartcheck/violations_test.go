package chartcheck

import (
	"reflect"
	"strings"
	"testing"
)

func TestViolationsPointAtTheValue(t *testing.T) {
	c, err := Load(chartsDir)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		set     func(map[string]any)
		path    []string
		message string
	}{
		"maximum":                  {func(v map[string]any) { v["replicaCount"] = 100 }, []string{"replicaCount"}, "maximum"},
		"type":                     {func(v map[string]any) { v["replicaCount"] = "secret/x" }, []string{"replicaCount"}, "want integer"},
		"enum":                     {func(v map[string]any) { v["logLevel"] = "chatty" }, []string{"logLevel"}, "one of"},
		"nested":                   {func(v map[string]any) { v["capsule"].(map[string]any)["code"] = "devusr" }, []string{"capsule", "code"}, "pattern"},
		"big float for an integer": {func(v map[string]any) { v["replicaCount"] = 1.2345678901234568e39 }, []string{"replicaCount"}, "maximum"},
		// The module charts' schemas are closed: a key no chart reads is refused at the
		// key itself, with the one meant.
		"unknown key": {func(v map[string]any) { v["replicaCont"] = 2 }, []string{"replicaCont"}, `no such key (did you mean "replicaCount"?)`},
		"unknown nested key": {func(v map[string]any) {
			v["image"] = map[string]any{"repository": "r", "tag": "t", "pullPolcy": "Always"}
		}, []string{"image", "pullPolcy"}, `did you mean "pullPolicy"?`},
		"unknown, nothing near": {func(v map[string]any) { v["zzzzzzzz"] = 1 }, []string{"zzzzzzzz"}, "no such key"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			values := identity()
			tc.set(values)
			vs, err := c.Violations(Release{Tenant: "DEVUSR", Module: "crm", Namespace: "eva-tenant-devusr", Chart: "eva-crm", Version: "1.4.0", Values: values})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, v := range vs {
				if reflect.DeepEqual(v.Path, tc.path) && strings.Contains(v.Message, tc.message) && !v.Template {
					found = true
				}
			}
			if !found {
				t.Errorf("no violation at %v with %q among %+v", tc.path, tc.message, vs)
			}
		})
	}
	if vs, err := c.Violations(Release{Tenant: "DEVUSR", Module: "crm", Namespace: "eva-tenant-devusr", Chart: "eva-crm", Version: "1.4.0", Values: identity()}); err != nil || len(vs) != 0 {
		t.Errorf("valid values: %v, %v", vs, err)
	}
	if _, err := c.Violations(Release{Module: "erp", Chart: "eva-erp"}); err == nil {
		t.Error("unknown chart: no error")
	}
}

func TestParseSchemaError(t *testing.T) {
	text := "values do not satisfy values.schema.json:\n    eva-crm:\n    - at '/replicaCount': got string, want integer\n" +
		"    - at '/a~1b/it\\'s/0': value must be one of 'x'\n    - at '': missing property 'image'\n    - at '/\\n\"x\"': bad\n"
	got := parseSchemaError(text)
	want := []Violation{
		{Path: []string{"replicaCount"}, Message: "got string, want integer"},
		{Path: []string{"a/b", "it's", "0"}, Message: "value must be one of 'x'"},
		{Path: nil, Message: "missing property 'image'"},
		{Path: []string{"\n\"x\""}, Message: "bad"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseSchemaError:\n got %#v\nwant %#v", got, want)
	}
	// Text without any place is kept, never dropped.
	if got := parseSchemaError("something\nunexpected"); len(got) != 2 || got[0].Message != "something" {
		t.Errorf("unparsed text: %#v", got)
	}
}
