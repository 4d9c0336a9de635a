package tenantfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aidonow/eva/internal/tenant"
)

func writeTenant(t *testing.T, dir, code string, wave int) string {
	t.Helper()
	p := filepath.Join(dir, code+".yaml")
	doc := "apiVersion: eva.aidonow.com/v1alpha1\nkind: EvaTenant\nmetadata:\n  name: " + strings.ToLower(code) +
		"\nspec:\n  capsuleCode: " + code + "\n  tier: Starter\n  wave: " + string(rune('0'+wave)) + "\n"
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	return p
}

func reused(res *Result) map[string]bool {
	out := map[string]bool{}
	for _, t := range res.Tenants {
		if t.Reused {
			out[t.Object.Spec.CapsuleCode] = true
		}
	}
	return out
}

// TestLoadReusesOnlyUnchangedFiles: a file the previous load recorded is reused while
// it is the same on disk, and read again when its content, inode or times say it may
// have changed, when it became a link, or when its tenant has Secret files.
func TestLoadReusesOnlyUnchangedFiles(t *testing.T) {
	catalog := tenant.DefaultCatalog()
	dir := t.TempDir()
	for i, code := range []string{"AAAAAA", "BBBBBB", "CCCCCC", "DDDDDD", "EEEEEE"} {
		writeTenant(t, dir, code, 1+i%3)
	}
	// DDDDDD was written just before the load: a later edit within the file system's
	// timestamp granularity could keep its time, so it is never trusted.
	recent := time.Now().Add(-300 * time.Millisecond)
	_ = os.Chtimes(filepath.Join(dir, "DDDDDD.yaml"), recent, recent)
	start := time.Now()
	first, err := LoadWith([]string{dir}, catalog, LoadOptions{})
	if err != nil || !first.Valid() {
		t.Fatalf("first load: %v %v", err, first.Problems)
	}
	opts := LoadOptions{Previous: first.Known(), Recorded: start}
	if len(opts.Previous) != 5 {
		t.Fatalf("recorded %d files, want 5", len(opts.Previous))
	}

	// Unchanged: every tenant but DDDDDD is a stub, still checked across files.
	again, err := LoadWith([]string{dir}, catalog, opts)
	if err != nil || !again.Valid() || len(reused(again)) != 4 || reused(again)["DDDDDD"] {
		t.Fatalf("unchanged files not reused: %v %v %v", err, again.Problems, reused(again))
	}

	// BBBBBB edited keeping size and time; CCCCCC replaced by a new file with the same
	// content and time.
	b := filepath.Join(dir, "BBBBBB.yaml")
	info, _ := os.Stat(b)
	data, _ := os.ReadFile(b)
	if err := os.WriteFile(b, []byte(strings.Replace(string(data), "wave: 2", "wave: 3", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(b, info.ModTime(), info.ModTime())
	c := filepath.Join(dir, "CCCCCC.yaml")
	cinfo, _ := os.Stat(c)
	cdata, _ := os.ReadFile(c)
	_ = os.Remove(c)
	_ = os.WriteFile(c, cdata, 0o644)
	_ = os.Chtimes(c, cinfo.ModTime(), cinfo.ModTime())
	// EEEEEE becomes a link to a copy of itself: refused, never reused.
	e := filepath.Join(dir, "EEEEEE.yaml")
	edata, _ := os.ReadFile(e)
	outside := filepath.Join(t.TempDir(), "EEEEEE.yaml")
	_ = os.WriteFile(outside, edata, 0o644)
	_ = os.Remove(e)
	if err := os.Symlink(outside, e); err != nil {
		t.Fatal(err)
	}

	res, err := LoadWith([]string{dir}, catalog, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := reused(res); len(got) != 1 || !got["AAAAAA"] {
		t.Fatalf("reused %v, want only AAAAAA", got)
	}
	for _, tn := range res.Tenants {
		if tn.Object.Spec.CapsuleCode == "BBBBBB" && tn.Object.Spec.Wave != 3 {
			t.Fatalf("BBBBBB read as wave %d, want the edited 3", tn.Object.Spec.Wave)
		}
	}
	if res.Valid() || !strings.Contains(res.Problems[0].String(), "symbolic link") {
		t.Fatalf("the link was not refused: %v", res.Problems)
	}
	if res.Known() != nil {
		t.Fatal("an invalid load recorded files for reuse")
	}
}

// TestReloadDecodesAStub: a stub decodes into the full tenant, and a file changed
// since it was judged unchanged is an error, not a stale tenant.
func TestReloadDecodesAStub(t *testing.T) {
	catalog := tenant.DefaultCatalog()
	dir := t.TempDir()
	p := writeTenant(t, dir, "AAAAAA", 2)
	start := time.Now()
	first, _ := LoadWith([]string{dir}, catalog, LoadOptions{})
	res, _ := LoadWith([]string{dir}, catalog, LoadOptions{Previous: first.Known(), Recorded: start})
	stub := res.Tenants[0]
	if !stub.Reused || stub.Object.Spec.Tier != "" {
		t.Fatalf("not a stub: %+v", stub.Object.Spec)
	}
	full, err := Reload(stub, catalog)
	if err != nil || full.Reused || full.Object.Spec.Tier != "Starter" || full.Object.Spec.Wave != 2 {
		t.Fatalf("reload: %v %+v", err, full)
	}
	writeTenant(t, dir, "AAAAAA", 3)
	if _, err := Reload(stub, catalog); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("a changed file reloaded without error: %v", err)
	}
}

// TestTenantsWithSecretsAreNotReused: their checks read their spec.
func TestTenantsWithSecretsAreNotReused(t *testing.T) {
	catalog := tenant.DefaultCatalog()
	src := filepath.Join("..", "..", "tenants")
	start := time.Now()
	first, err := LoadWith([]string{src}, catalog, LoadOptions{})
	if err != nil || !first.Valid() {
		t.Fatalf("examples: %v %v", err, first.Problems)
	}
	known := first.Known()
	for _, s := range first.Secrets {
		for path, k := range known {
			if k.Code == s.Code {
				t.Errorf("%s, whose tenant has Secret %s, was recorded for reuse", path, s.File)
			}
		}
	}
	res, _ := LoadWith([]string{src}, catalog, LoadOptions{Previous: known, Recorded: start})
	for code := range reused(res) {
		for _, s := range res.Secrets {
			if s.Code == code {
				t.Errorf("%s reused though it has Secret files", code)
			}
		}
	}

	// A Secret file appearing beside a recorded, unchanged tenant file: the tenant is
	// decoded again, since its checks (a Secret both inline and in a file, secretMounts)
	// read its spec.
	dir := t.TempDir()
	p := writeTenant(t, dir, "AAAAAA", 1)
	start = time.Now()
	first, _ = LoadWith([]string{dir}, catalog, LoadOptions{})
	opts := LoadOptions{Previous: first.Known(), Recorded: start}
	if res, _ := LoadWith([]string{dir}, catalog, opts); !reused(res)["AAAAAA"] {
		t.Fatal("the unchanged tenant was not reused")
	}
	secret := filepath.Join(filepath.Dir(p), "AAAAAA.db.sops.yaml")
	if err := os.WriteFile(secret, []byte("not: checked here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res, _ := LoadWith([]string{dir}, catalog, opts); reused(res)["AAAAAA"] {
		t.Fatal("a tenant with a new Secret file was reused")
	}
}

// TestNewFileSharingAReusedCodeIsRefused: when every other tenant is an unchanged stub,
// a new file whose capsule code or object name one of them holds is still refused (the
// cross-file checks are skipped only when every tenant is a stub of the last valid load).
func TestNewFileSharingAReusedCodeIsRefused(t *testing.T) {
	catalog := tenant.DefaultCatalog()
	dir := t.TempDir()
	writeTenant(t, dir, "AAAAAA", 1)
	writeTenant(t, dir, "BBBBBB", 2)
	start := time.Now()
	first, err := LoadWith([]string{dir}, catalog, LoadOptions{})
	if err != nil || !first.Valid() {
		t.Fatalf("first load: %v %v", err, first.Problems)
	}
	opts := LoadOptions{Previous: first.Known(), Recorded: start}
	// Nothing changed: every tenant is a stub, and the set is still valid.
	again, err := LoadWith([]string{dir}, catalog, opts)
	if err != nil || !again.Valid() || len(reused(again)) != 2 {
		t.Fatalf("unchanged load: %v, problems %v, reused %v", err, again.Problems, reused(again))
	}
	// A new file taking AAAAAA's object name, beside two stubs.
	doc := "apiVersion: eva.aidonow.com/v1alpha1\nkind: EvaTenant\nmetadata:\n  name: aaaaaa\nspec:\n  capsuleCode: CCCCCC\n  tier: Starter\n"
	if err := os.WriteFile(filepath.Join(dir, "CCCCCC.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := LoadWith([]string{dir}, catalog, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(reused(res)) != 2 {
		t.Fatalf("reused %v, want AAAAAA and BBBBBB", reused(res))
	}
	found := false
	for _, p := range res.Problems {
		found = found || (p.File == filepath.Join(dir, "CCCCCC.yaml") && strings.Contains(p.Message, "object name aaaaaa is also used by"))
	}
	if !found {
		t.Fatalf("the duplicate object name was not refused: %v", res.Problems)
	}
}

// TestDamagedCacheEntryIsNotReused: a recorded sum of the wrong length (a damaged or
// foreign cache) makes the file be read again, never a crash.
func TestDamagedCacheEntryIsNotReused(t *testing.T) {
	catalog := tenant.DefaultCatalog()
	dir := t.TempDir()
	writeTenant(t, dir, "AAAAAA", 1)
	start := time.Now()
	first, err := LoadWith([]string{dir}, catalog, LoadOptions{})
	if err != nil || !first.Valid() {
		t.Fatalf("first load: %v %v", err, first.Problems)
	}
	previous := first.Known()
	for path, k := range previous {
		k.Sum += "00" // valid hex, one byte too long
		previous[path] = k
	}
	res, err := LoadWith([]string{dir}, catalog, LoadOptions{Previous: previous, Recorded: start})
	if err != nil || !res.Valid() || len(reused(res)) != 0 || len(res.Tenants) != 1 {
		t.Fatalf("load: %v, problems %v, reused %v", err, res.Problems, reused(res))
	}
}
