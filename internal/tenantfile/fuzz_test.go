package tenantfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/aidonow/eva/internal/safetext"
	"github.com/aidonow/eva/internal/tenant"
)

// FuzzValidateFile feeds arbitrary bytes to the tenant file parser and validator: it
// must never panic, every problem must carry a position, and a file reported valid
// must have decoded into a tenant that validates again.
func FuzzValidateFile(f *testing.F) {
	examples, _ := filepath.Glob("../../tenants/*.yaml")
	for _, e := range examples {
		data, err := os.ReadFile(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"", "---\n", "- a\n", "apiVersion: [\n", "a: &x {b: *x}\n", "<<: {a: 1}\n",
		"spec:\n  capsuleCode: 123\n  wave: 1e9\n  versions: {crm: .inf}\n",
		"spec: {helmValues: {crm: {password: x, a: [1, {token: y}]}}}\n",
		"spec:\n  wave: 0\n  helmValues: {crm: {\"k\\n::warning::x\": !vault y, n: 123456789012345678901234567890}}\nmetadata: {finalizers: [a], labels: {eva.aidonow.com/x: y}}\n",
		"apiVersion: eva.aidonow.com/v1alpha1\nkind: EvaTenant\nmetadata: {name: x}\nspec: {capsuleCode: ABCDEF, tier: Starter}\n---\nx: 1\n",
	} {
		f.Add([]byte(s))
	}
	catalog := tenant.DefaultCatalog()
	f.Fuzz(func(t *testing.T, data []byte) {
		tn, problems := Parse("ABCDEF.yaml", data, catalog)
		for _, p := range problems {
			if p.Line < 1 || p.Column < 1 || p.Message == "" || p.File != "ABCDEF.yaml" {
				t.Fatalf("problem without a position or message: %+v", p)
			}
			// Every problem is safe to print: one printable line, bounded.
			for _, s := range []string{p.Field, p.Message} {
				for _, r := range s {
					if !unicode.IsPrint(r) {
						t.Fatalf("problem holds %U: %+v", r, p)
					}
				}
			}
			if utf8.RuneCountInString(p.Message) > safetext.MaxMessage+40 || utf8.RuneCountInString(p.Field) > maxField+40 {
				t.Fatalf("problem too long: %d/%d", len(p.Field), len(p.Message))
			}
		}
		if len(problems) == 0 {
			if tn == nil || tn.Object == nil {
				t.Fatal("valid file decoded to nothing")
			}
			if errs := catalog.Validate(tn.Object); len(errs) != 0 {
				t.Fatalf("valid file's tenant fails validation: %v", errs)
			}
		}
	})
}

func TestParseRefusesAliasBomb(t *testing.T) {
	doc := "apiVersion: eva.aidonow.com/v1alpha1\nkind: EvaTenant\nmetadata: {name: abcdef}\nspec:\n  capsuleCode: ABCDEF\n  tier: Starter\n  helmValues:\n    crm:\n"
	doc += "      a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, name := range []string{"b", "c", "d", "e", "f", "g"} {
		doc += "      " + name + ": &" + name + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
		prev = name
	}
	_, problems := Parse("ABCDEF.yaml", []byte(doc), tenant.DefaultCatalog())
	found := false
	for _, p := range problems {
		if strings.Contains(p.Message, "YAML anchors") || strings.Contains(p.Message, "aliases") {
			found = true
		}
	}
	if !found {
		t.Fatalf("alias bomb not refused: %v", problems)
	}
}
