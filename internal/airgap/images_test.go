package airgap

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aidonow/eva/internal/chartcheck"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenant"
)

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestParse(t *testing.T) {
	cases := map[string]struct {
		text    string
		entries int
		line    int
		want    string
	}{
		"valid with comments":  {"# operator\nghcr.io/aidonow/eva-operator:0.1.0@" + digest + "\n\n  # x\nregistry.k8s.io/pause@" + digest + " # trailing\n", 2, 0, ""},
		"placeholder":          {"ghcr.io/aidonow/eva-crm:1.4.0@sha256:PLACEHOLDER\n", 1, 1, "PLACEHOLDER"},
		"tag only":             {"\nghcr.io/aidonow/eva-crm:1.4.0\n", 0, 2, "not pinned by digest"},
		"malformed digest":     {"ghcr.io/aidonow/eva-crm@sha256:abc\n", 0, 1, "not a valid digest reference"},
		"malformed repository": {"ghcr.io/Aidonow/EVA@" + digest + "\n", 0, 1, "not a valid digest reference"},
		"duplicate":            {"a.io/x:1@" + digest + "\nb.io/y@" + digest + "\na.io/x:1@" + digest + "\n", 2, 3, "already listed on line 1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			entries, problems := Parse(strings.NewReader(tc.text))
			if len(entries) != tc.entries {
				t.Errorf("%d entries, want %d", len(entries), tc.entries)
			}
			if tc.want == "" {
				if len(problems) != 0 {
					t.Errorf("problems: %v", problems)
				}
				return
			}
			if len(problems) != 1 || problems[0].Line != tc.line || !strings.Contains(problems[0].Message, tc.want) {
				t.Errorf("problems %v, want line %d with %q", problems, tc.line, tc.want)
			}
		})
	}
}

func TestCoverage(t *testing.T) {
	env, err := overlay.Load(filepath.Join("..", "..", "overlays"), "dev")
	if err != nil {
		t.Fatal(err)
	}
	charts, err := chartcheck.Load(filepath.Join("..", "..", "charts"))
	if err != nil {
		t.Fatal(err)
	}
	images, err := ChartImages(&render.Renderer{Catalog: tenant.DefaultCatalog(), Env: env}, charts)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ghcr.io/aidonow/eva-crm:1.4.0", "ghcr.io/aidonow/eva-shell:2.1.0", "ghcr.io/aidonow/eva-seeder:0.1.0"} {
		if _, ok := images[want]; !ok {
			t.Errorf("image %s not found among %v", want, images)
		}
	}
	// Everything listed but the gateway: the gateway chart is named.
	var text strings.Builder
	for img := range images {
		if !strings.Contains(img, "eva-gateway") {
			text.WriteString(img + "@" + digest + "\n")
		}
	}
	entries, problems := Parse(strings.NewReader(text.String()))
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	missing := Covers(entries, images)
	if len(missing) != 1 || missing[0].Chart != "eva-gateway" || !strings.Contains(missing[0].String(), "chart eva-gateway: image ghcr.io/aidonow/eva-gateway:1.0.0 is not listed") {
		t.Fatalf("coverage problems: %v", missing)
	}
}
