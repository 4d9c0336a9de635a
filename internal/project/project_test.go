package project

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aidonow/eva/internal/docsection"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFindWalksUp finds the project file from a folder below it, as go finds go.mod,
// and resolves its folders against the file's folder.
func TestFindWalksUp(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, FileName), "apiVersion: eva.aidonow.com/v1alpha1\nkind: Fleet\neva: 0.2.0\nenvironments: envs\n")
	below := filepath.Join(root, "tenants", "notes")
	if err := os.MkdirAll(below, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	f, err := Find(below)
	if err != nil || f == nil {
		t.Fatalf("Find: %v %v", f, err)
	}
	if f.Release != "0.2.0" || f.Tenants != "tenants" || f.Environments != "envs" || f.Charts != "charts" || f.Rollouts != "rollouts" {
		t.Fatalf("fleet: %+v", f)
	}
	if f, err := Find(t.TempDir()); f != nil || err != nil {
		t.Fatalf("Find outside any fleet: %v %v", f, err)
	}
}

// TestLoadRefusesAtLineAndColumn refuses what would silently do something else: an
// unknown field (with the name meant), another kind, a folder leading out of the
// repository, a release that is not a version; each at its line and column.
func TestLoadRefusesAtLineAndColumn(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"apiVersion: eva.aidonow.com/v1alpha1\nkind: Fleet\ntenant: people\n", "eva.yaml:3:1: tenant: unknown field (did you mean \"tenants\"?)"},
		{"apiVersion: eva.aidonow.com/v1alpha1\nkind: Fleet\ncharts: ../elsewhere\n", "eva.yaml:3:9: charts: \"../elsewhere\" must be a folder inside the repository"},
		{"apiVersion: eva.aidonow.com/v1alpha1\nkind: Fleet\nrollouts: /etc\n", "eva.yaml:3:11: rollouts: \"/etc\" must be a folder inside the repository"},
		{"apiVersion: eva.aidonow.com/v1alpha1\nkind: Fleet\neva: latest\n", "eva.yaml:3:6: eva: \"latest\" is not an Eva release version"},
		{"apiVersion: eva.aidonow.com/v1alpha1\nkind: EvaTenant\n", "eva.yaml:2:7: kind: must be Fleet"},
		{"apiVersion: v1\nkind: Fleet\n---\nkind: Fleet\n", "eva.yaml:3:1: more than one YAML document"},
	} {
		dir := t.TempDir()
		t.Chdir(dir)
		write(t, FileName, tc.body)
		_, err := Load(FileName)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%q): %v, want %q", tc.body, err, tc.want)
		}
	}
}

// TestCheckRelease refuses evactl of another release and lets a development build
// through.
func TestCheckRelease(t *testing.T) {
	f := &Fleet{Path: "eva.yaml", Release: "v0.2.0"}
	if err := f.CheckRelease("0.2.0"); err != nil {
		t.Fatalf("same release: %v", err)
	}
	if err := f.CheckRelease(""); err != nil {
		t.Fatalf("development build: %v", err)
	}
	err := f.CheckRelease("0.3.0")
	if err == nil || !strings.Contains(err.Error(), "this fleet uses Eva 0.2.0 and this evactl is 0.3.0") || !strings.Contains(err.Error(), "evactl@v0.2.0") {
		t.Fatalf("another release: %v", err)
	}
}

// TestFindRefusesAnotherUsersProjectFile refuses an eva.yaml another user owns in a
// folder above the working directory (a shared /tmp), as git refuses such a repository.
func TestFindRefusesAnotherUsersProjectFile(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("giving a file to another user takes root")
	}
	root := t.TempDir()
	path := filepath.Join(root, FileName)
	write(t, path, "apiVersion: eva.aidonow.com/v1alpha1\nkind: Fleet\ncharts: planted\n")
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	below := filepath.Join(root, "work")
	if err := os.Mkdir(below, 0o755); err != nil {
		t.Fatal(err)
	}
	if f, err := Find(below); err == nil || !strings.Contains(err.Error(), "owned by another user (uid 65534)") {
		t.Fatalf("Find: %+v, %v", f, err)
	}
}

// TestTheDocumentedProjectFileLoads: the eva.yaml docs/fleet-repository.md shows is
// read as evactl reads it, environment and publish target included.
func TestTheDocumentedProjectFileLoads(t *testing.T) {
	blocks, err := docsection.Blocks(filepath.Join("..", "..", "docs", "fleet-repository.md"), "eva.yaml", "yaml")
	if err != nil || len(blocks) == 0 {
		t.Fatalf("no eva.yaml block: %v", err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, []byte(blocks[0].Text), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatalf("docs/fleet-repository.md's eva.yaml (block ending at line %d): %v", blocks[0].Line, err)
	}
	if f.Environment != "dev" || f.Publish == nil || f.Publish.Repo == "" || f.Publish.Path != "clusters/dev" {
		t.Errorf("loaded %+v, publish %+v", f, f.Publish)
	}
}

// TestPublishTargetIsOneOfTwo: a publish target names a repository or an artifact, a
// folder inside it, and an environment is an environment name.
func TestPublishTargetIsOneOfTwo(t *testing.T) {
	for body, want := range map[string]string{
		"publish: {repo: x, ref: oci://r/x:t}\n":        "publish: names a git repository (repo) or an OCI artifact (ref), one of them",
		"publish: {branch: main}\n":                     "publish: names a git repository",
		"publish: {ref: r/x:t}\n":                       `publish.ref: "r/x:t" is not an oci://HOST/REPO:TAG reference`,
		"publish: {ref: oci://r/x:t, path: clusters}\n": "publish: branch and path are a git repository's",
		"publish: {repo: x, path: ../out}\n":            `publish.path: "../out" must be a folder inside the repository`,
		"environment: Prod\n":                           `environment: "Prod" is not an environment name`,
		"publish: {repo: x, brnach: main}\n":            `publish.brnach: unknown field (did you mean "branch"?)`,
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, FileName)
		if err := os.WriteFile(path, []byte("apiVersion: eva.aidonow.com/v1alpha1\nkind: Fleet\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}
