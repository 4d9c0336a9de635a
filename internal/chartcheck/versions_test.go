package chartcheck

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aidonow/eva/internal/chartrepo"
)

// chartFolder copies the repository's eva-crm chart into a charts folder of its own,
// with its Chart.yaml version replaced, and returns the folder holding it.
func chartFolder(t *testing.T, version, marker string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "eva-crm")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(chartsDir, "eva-crm"))); err != nil {
		t.Fatal(err)
	}
	meta, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(meta), "version: 1.4.0", "version: "+version, 1)
	if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if marker != "" {
		tpl := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + marker + "\n"
		if err := os.WriteFile(filepath.Join(dir, "templates", "marker.yaml"), []byte(tpl), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func crmRelease(version string) Release {
	return Release{Tenant: "DEVUSR", Module: "crm", Namespace: "eva-tenant-devusr", Chart: "eva-crm", Version: version, Values: identity()}
}

// TestPinsMustExist: a pin is checked against the versions published (or, without a
// published.yaml, the folder's own), and the version rendered is the one pinned: an
// older published version is pulled through the fetcher and rendered from its archive,
// never from the folder's newer chart.
func TestPinsMustExist(t *testing.T) {
	// Without published.yaml only the folder's version exists.
	plain, err := Load(chartFolder(t, "1.4.0", ""))
	if err != nil {
		t.Fatal(err)
	}
	var missing *MissingVersionError
	if err := plain.Check(crmRelease("v0.7.3")); !errors.As(err, &missing) || missing.Version != "v0.7.3" {
		t.Fatalf("a pin to a version that does not exist: %v", err)
	}
	if err := plain.Check(crmRelease("v1.4.0")); err != nil {
		t.Fatalf("a pin with a leading v: %v", err)
	}

	// The published versions: 1.3.0 (pulled) and 1.4.0 (the folder's).
	oldDir := chartFolder(t, "1.3.0", "only-in-1-3-0")
	old, err := chartrepo.Package(filepath.Join(oldDir, "eva-crm"))
	if err != nil {
		t.Fatal(err)
	}
	charts := chartFolder(t, "1.4.0", "")
	current, err := chartrepo.Package(filepath.Join(charts, "eva-crm"))
	if err != nil {
		t.Fatal(err)
	}
	lock := &chartrepo.Lock{}
	fake := func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
	lock.Add("eva-crm", chartrepo.Published{Version: "1.3.0", Digest: fake("a"), Archive: old.Digest})
	lock.Add("eva-crm", chartrepo.Published{Version: "1.4.0", Digest: fake("b"), Archive: current.Digest})
	if err := lock.Write(filepath.Join(charts, chartrepo.LockFile)); err != nil {
		t.Fatal(err)
	}
	c, err := Load(charts)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Check(crmRelease("1.2.9")); !errors.As(err, &missing) || !strings.Contains(err.Error(), "versions: 1.3.0, 1.4.0") {
		t.Fatalf("a pin absent from published.yaml: %v", err)
	}
	// A release whose source pins a digest is checked only at the digest recorded for
	// its version: one pinning 1.3.0's digest under the tag 1.4.0 is refused.
	pinned := crmRelease("1.4.0")
	pinned.Digest = fake("b")
	if err := c.Check(pinned); err != nil {
		t.Fatalf("a release pinned to its version's digest: %v", err)
	}
	pinned.Digest = fake("a")
	if err := c.Check(pinned); err == nil || !strings.Contains(err.Error(), "its source pins "+fake("a")) {
		t.Fatalf("a release pinned to another version's digest: %v", err)
	}
	if _, err := c.Render(crmRelease("1.3.0")); err == nil || !strings.Contains(err.Error(), "chartSource.url") {
		t.Fatalf("an older version without a way to pull it: %v", err)
	}

	pulls := 0
	c, _ = Load(charts)
	c.SetFetcher(func(chart string, p chartrepo.Published) ([]byte, error) {
		pulls++
		if chart != "eva-crm" || p.Archive != old.Digest {
			t.Errorf("fetch %s %+v", chart, p)
		}
		return old.Data, nil
	})
	out, err := c.Render(crmRelease("1.3.0"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out["eva-crm/templates/marker.yaml"]; !ok {
		t.Fatalf("1.3.0 rendered without its own template: %v", keys(out))
	}
	out, err = c.Render(crmRelease("1.4.0"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out["eva-crm/templates/marker.yaml"]; ok {
		t.Fatal("1.4.0 rendered 1.3.0's template")
	}
	if _, err := c.Render(crmRelease("1.3.0")); err != nil || pulls != 1 {
		t.Fatalf("a version is pulled once: %d pulls, %v", pulls, err)
	}

	// A fetcher handing back other bytes is caught by digest.
	c, _ = Load(charts)
	c.SetFetcher(func(string, chartrepo.Published) ([]byte, error) { return current.Data, nil })
	if err := c.Check(crmRelease("1.3.0")); err == nil {
		t.Fatal("an archive of another digest was rendered")
	}

	// The folder's chart changed without a version bump.
	if err := os.WriteFile(filepath.Join(charts, "eva-crm", "values.yaml"), []byte("replicaCount: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err = Load(charts)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Check(crmRelease("1.4.0")); err == nil || !strings.Contains(err.Error(), "raise its version") {
		t.Fatalf("a changed chart under a published version: %v", err)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
