package eva

import (
	"os"
	"strings"
	"testing"
)

// TestDevelopmentDocsNameEveryPackage fails when a folder of cmd/, internal/ or hack/
// is missing from the layout in docs/development.md: a package added without saying
// what it is for.
func TestDevelopmentDocsNameEveryPackage(t *testing.T) {
	data, err := os.ReadFile("docs/development.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, parent := range []string{"cmd", "internal", "hack"} {
		entries, err := os.ReadDir(parent)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() && !strings.Contains(string(data), parent+"/"+e.Name()+"/") {
				t.Errorf("docs/development.md does not name %s/%s/", parent, e.Name())
			}
		}
	}
}
