package release

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"

	"github.com/aidonow/eva/internal/testenv"
)

// modulePath is Eva's module path, the one `go install …@version` names.
const modulePath = "github.com/aidonow/eva"

// TestGoInstallAtAVersion installs evactl as the docs tell users to, `go install
// github.com/aidonow/eva/cmd/evactl@v<version>`, from a module proxy on disk serving
// this checkout's files (git's view of them: tracked and new, not ignored) zipped by
// Go's own module zip library, as a proxy would serve a tagged commit; the other modules
// come from the module cache. What breaks `go install @version` and no other build
// breaks here: a replace directive, an embedded file the module zip leaves out, a
// file name a module cannot hold. The installed evactl knows its release.
func TestGoInstallAtAVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles evactl from a module zip")
	}
	root := testenv.RepoRoot()
	tree := t.TempDir()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	listed, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	content := sha256.New()
	for _, name := range strings.Split(strings.TrimRight(string(listed), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			continue // deleted in the working tree
		}
		fmt.Fprintf(content, "%d:%s\n%d\n", len(name), name, len(data))
		content.Write(data)
		if err := os.MkdirAll(filepath.Join(tree, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tree, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Go takes a module version's files to never change: the module cache keeps what it
	// extracted, and the build cache indexes it, by version. The version is named by
	// the files' digest, so other files are another version and the same files reuse
	// what the caches know; it leaves the module cache after the test.
	v := module.Version{Path: modulePath, Version: fmt.Sprintf("v%s-goinstall.h%x", version, content.Sum(nil)[:6])}
	forgetModule(t, v)
	proxy := t.TempDir()
	dir := filepath.Join(proxy, modulePath, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	zf, err := os.Create(filepath.Join(dir, v.Version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	if err := modzip.CreateFromDir(zf, v, tree); err != nil {
		t.Fatalf("zipping the module as a proxy serves it: %v", err)
	}
	if err := zf.Close(); err != nil {
		t.Fatal(err)
	}
	gomod, _ := os.ReadFile(filepath.Join(tree, "go.mod"))
	info, _ := json.Marshal(map[string]any{"Version": v.Version, "Time": time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)})
	for name, data := range map[string][]byte{"list": []byte(v.Version + "\n"), v.Version + ".info": info, v.Version + ".mod": gomod} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	bin := t.TempDir()
	install := exec.Command("go", "install", modulePath+"/cmd/evactl@"+v.Version)
	install.Dir = t.TempDir()
	// The module cache answers for every other module (it holds what this checkout
	// builds with); nothing is fetched.
	install.Env = append(os.Environ(), "GOBIN="+bin, "GOPROXY=file://"+proxy, "GOSUMDB=off", "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install %s/cmd/evactl@%s: %v\n%s", modulePath, v.Version, err, out)
	}
	out, err := exec.Command(filepath.Join(bin, "evactl"), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "evactl "+v.Version+" ") {
		t.Fatalf("the installed evactl says %q (%v), want %s", out, err, v.Version)
	}
}

// forgetModule removes v from the module cache now and after the test: the extracted
// files (which Go makes read-only) and the downloaded zip.
func forgetModule(t *testing.T, v module.Version) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	cache := strings.TrimSpace(string(out))
	forget := func() {
		extracted := filepath.Join(cache, v.Path+"@"+v.Version)
		_ = filepath.WalkDir(extracted, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(path, 0o755)
			}
			return nil
		})
		_ = os.RemoveAll(extracted)
		downloaded, _ := filepath.Glob(filepath.Join(cache, "cache", "download", v.Path, "@v", v.Version+".*"))
		for _, f := range downloaded {
			_ = os.Remove(f)
		}
	}
	forget()
	t.Cleanup(forget)
}
