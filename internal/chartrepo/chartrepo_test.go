package chartrepo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	helmregistry "helm.sh/helm/v3/pkg/registry"

	"github.com/aidonow/eva/internal/registry"
	"github.com/aidonow/eva/internal/testenv"
)

// copyChart copies a module chart of the repository to a scratch folder.
func copyChart(t *testing.T, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(testenv.RepoRoot(), "charts", name))); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestPackageIsReproducible packages the same chart twice, with its files' times
// changed in between: the archive and its digest are identical, and Helm loads it.
func TestPackageIsReproducible(t *testing.T) {
	dir := copyChart(t, "eva-crm")
	first, err := Package(dir)
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Chtimes(p, later, later) }); err != nil {
		t.Fatal(err)
	}
	second, err := Package(dir)
	if err != nil {
		t.Fatal(err)
	}
	if first.Digest != second.Digest {
		t.Fatalf("packaging twice gave %s then %s", first.Digest, second.Digest)
	}
	if _, err := Load(first.Data, "eva-crm", "v"+first.Version); err != nil {
		t.Fatalf("Helm cannot load the archive: %v", err)
	}
	// A changed file is a changed archive.
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), []byte("replicaCount: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	third, err := Package(dir)
	if err != nil {
		t.Fatal(err)
	}
	if third.Digest == first.Digest {
		t.Fatal("a changed values.yaml packaged to the same digest")
	}
}

// TestPushPullAndHelm pushes a chart, pulls it back by digest, reads it with Helm's own
// registry client, mirrors it, and refuses to push other content under a published
// version.
func TestPushPullAndHelm(t *testing.T) {
	ctx := context.Background()
	reg := registry.Options{Insecure: true}
	source := "oci://" + testenv.Registry(t) + "/eva/charts"
	dir := copyChart(t, "eva-whisper")
	a, err := Package(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Push(ctx, source, a, reg)
	if err != nil {
		t.Fatal(err)
	}
	if p.Archive != a.Digest || p.Version != a.Version {
		t.Fatalf("published %+v for archive %s %s", p, a.Version, a.Digest)
	}
	again, err := Push(ctx, source, a, reg)
	if err != nil || again != p {
		t.Fatalf("pushing the same archive again: %+v, %v (want %+v)", again, err, p)
	}
	data, err := Pull(ctx, source, a.Name, p, reg)
	if err != nil {
		t.Fatal(err)
	}
	if Digest(data) != a.Digest {
		t.Fatalf("pulled %s, pushed %s", Digest(data), a.Digest)
	}

	// Helm reads it as a chart, by tag.
	client, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP())
	if err != nil {
		t.Fatal(err)
	}
	repo, _ := Repository(source, a.Name)
	res, err := client.Pull(repo+":"+Tag(a.Version), helmregistry.PullOptWithChart(true))
	if err != nil {
		t.Fatalf("Helm cannot pull the pushed chart: %v", err)
	}
	if Digest(res.Chart.Data) != a.Digest || res.Manifest.Digest != p.Digest {
		t.Fatalf("Helm pulled chart %s manifest %s, want %s %s", Digest(res.Chart.Data), res.Manifest.Digest, a.Digest, p.Digest)
	}

	// Mirror it by digest.
	mirror := "oci://" + testenv.Registry(t) + "/mirror"
	if err := Copy(ctx, source, mirror, a.Name, p, reg); err != nil {
		t.Fatal(err)
	}
	if data, err := Pull(ctx, mirror, a.Name, p, reg); err != nil || Digest(data) != a.Digest {
		t.Fatalf("pulling from the mirror: %v", err)
	}

	// Other content under the same version is refused, and the tag keeps its digest.
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), []byte("replicaCount: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, err := Package(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Push(ctx, source, changed, reg); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Fatalf("pushing changed content as %s: %v, want refused", changed.Version, err)
	}
	if data, err := Pull(ctx, source, a.Name, p, reg); err != nil || Digest(data) != a.Digest {
		t.Fatalf("the published version changed: %v", err)
	}
	// A digest the registry does not hold is not pulled.
	wrong := p
	wrong.Archive = changed.Digest
	if _, err := Pull(ctx, source, a.Name, wrong, reg); err == nil {
		t.Fatal("pulled an archive digest the manifest does not name")
	}
}

// TestLock records versions, refuses changed content under a published version, and
// reads back what it wrote.
func TestLock(t *testing.T) {
	a, err := Package(copyChart(t, "eva-gateway"))
	if err != nil {
		t.Fatal(err)
	}
	l := &Lock{}
	p := Published{Version: a.Version, Digest: "sha256:" + strings.Repeat("a", 64), Archive: a.Digest}
	l.Add(a.Name, p)
	l.Add(a.Name, Published{Version: "0.9.0", Digest: "sha256:" + strings.Repeat("b", 64), Archive: "sha256:" + strings.Repeat("c", 64)})
	if got := l.Versions(a.Name); len(got) != 2 || got[0] != "0.9.0" {
		t.Fatalf("versions %v, want oldest first", got)
	}
	if err := l.Conflict(a); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Find(a.Name, "v"+a.Version); !ok {
		t.Fatal("a pin with a leading v does not find its version")
	}
	changed := *a
	changed.Digest = "sha256:" + strings.Repeat("d", 64)
	if err := l.Conflict(&changed); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Fatalf("conflict: %v", err)
	}
	path := filepath.Join(t.TempDir(), LockFile)
	if err := l.Write(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := back.Find(a.Name, a.Version); !ok || got != p {
		t.Fatalf("read back %+v", got)
	}
	if err := os.WriteFile(path, []byte("charts:\n  eva-gateway:\n  - version: 1.0.0\n    digest: sha256:abc\n    archive: sha256:abc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLock(path); err == nil || !strings.Contains(err.Error(), "charts[eva-gateway][0]") {
		t.Fatalf("a malformed digest: %v", err)
	}
}
