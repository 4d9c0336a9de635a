package eva

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
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

// impure are the imports a pure package may not have: a Kubernetes client, the
// network, the file system and processes, and the git, registry and NATS clients.
var impure = []string{"os", "os/exec", "io/ioutil", "net", "net/", "k8s.io/client-go", "sigs.k8s.io/controller-runtime",
	"github.com/go-git/", "github.com/google/go-containerregistry", "github.com/nats-io/"}

// TestPurePackagesDoNoIO holds docs/development.md's "(pure)" marks: each package so
// marked imports nothing of impure in its non-test files, so it takes values and returns
// values, and a change that gives it I/O fails here rather than in review.
func TestPurePackagesDoNoIO(t *testing.T) {
	data, err := os.ReadFile("docs/development.md")
	if err != nil {
		t.Fatal(err)
	}
	var pure []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[0], "internal/") && strings.HasSuffix(line, "(pure)") {
			pure = append(pure, strings.TrimSuffix(f[0], "/"))
		}
	}
	if len(pure) < 8 {
		t.Fatalf("docs/development.md marks %d packages pure (%v): the layout's marks were not read", len(pure), pure)
	}
	for _, dir := range pure {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Errorf("%s: no Go files (%v)", dir, err)
			continue
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				for _, bad := range impure {
					if path == bad || (strings.HasSuffix(bad, "/") && strings.HasPrefix(path, bad)) || strings.HasPrefix(path, bad+"/") {
						t.Errorf("%s imports %s: a package docs/development.md marks pure does no I/O", file, path)
						break
					}
				}
			}
		}
	}
}
