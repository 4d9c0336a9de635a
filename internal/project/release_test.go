package project

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// TestUnpackOncePerContent writes the release's files once per content, whole, into a
// cache folder it makes when there is none yet (a new user's).
func TestUnpackOncePerContent(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", filepath.Join(t.TempDir(), "not-yet"))
	release := fstest.MapFS{"overlays/dev/tenant/environment.yaml": {Data: []byte("domain: a.example\n")}, "charts/eva-crm/Chart.yaml": {Data: []byte("name: eva-crm\n")}}
	first, err := Unpack(release)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := Unpack(release); err != nil || again != first {
		t.Fatalf("second unpack of the same files: %s %v, want %s", again, err, first)
	}
	if data, err := os.ReadFile(filepath.Join(first, "overlays/dev/tenant/environment.yaml")); err != nil || string(data) != "domain: a.example\n" {
		t.Fatalf("unpacked file: %q %v", data, err)
	}
	release["charts/eva-crm/Chart.yaml"] = &fstest.MapFile{Data: []byte("name: eva-crm\nversion: 2\n")}
	if other, err := Unpack(release); err != nil || other == first {
		t.Fatalf("other content unpacked into the same folder: %s %v", other, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(first))
	if len(entries) != 2 {
		t.Fatalf("cache holds %d entries, want the two releases and no temporary folder", len(entries))
	}
}

// testRelease is a release's files for Unpack, with a chart schema.
func testRelease() fstest.MapFS {
	return fstest.MapFS{
		"overlays/dev/tenant/environment.yaml":    {Data: []byte("domain: a.example\n")},
		"charts/eva-crm/values.schema.json":       {Data: []byte(`{"additionalProperties": false}`)},
		"charts/eva-crm/templates/configmap.yaml": {Data: []byte("kind: ConfigMap\n")},
	}
}

// TestUnpackTrustsOnlyItsOwnFolder: a folder under the release's digest name that evactl
// did not write as it writes it (a weakened schema planted first, a folder others may
// write, a symlink out of it, a folder of another user) is refused with its path and
// the reason, and evactl reads nothing from it; a folder evactl wrote is found again.
func TestUnpackTrustsOnlyItsOwnFolder(t *testing.T) {
	plant := map[string]func(t *testing.T, dir string){
		"a weakened schema": func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "charts/eva-crm/values.schema.json"), "{}")
		},
		"a file added": func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "charts/eva-crm/templates/extra.yaml"), "kind: Secret\n")
		},
		"a folder others may write": func(t *testing.T, dir string) {
			if err := os.Chmod(filepath.Join(dir, "charts"), 0o777); err != nil {
				t.Fatal(err)
			}
		},
		"a file others may write": func(t *testing.T, dir string) {
			if err := os.Chmod(filepath.Join(dir, "charts/eva-crm/values.schema.json"), 0o666); err != nil {
				t.Fatal(err)
			}
		},
		"a symlink in place of a file": func(t *testing.T, dir string) {
			schema := filepath.Join(dir, "charts/eva-crm/values.schema.json")
			elsewhere := filepath.Join(t.TempDir(), "schema.json")
			data, err := os.ReadFile(schema)
			if err != nil {
				t.Fatal(err)
			}
			write(t, elsewhere, string(data))
			if err := os.Remove(schema); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, schema); err != nil {
				t.Fatal(err)
			}
		},
	}
	if os.Getuid() == 0 {
		plant["a folder of another user"] = func(t *testing.T, dir string) {
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, change := range plant {
		t.Run(name, func(t *testing.T) {
			t.Setenv("XDG_CACHE_HOME", t.TempDir())
			dir, err := Unpack(testRelease())
			if err != nil {
				t.Fatal(err)
			}
			if again, err := Unpack(testRelease()); err != nil || again != dir {
				t.Fatalf("the folder evactl wrote, found again: %s %v", again, err)
			}
			change(t, dir)
			got, err := Unpack(testRelease())
			if err == nil {
				t.Fatalf("Unpack trusted %s with %s", got, name)
			}
			if !strings.HasPrefix(err.Error(), dir) || !strings.Contains(err.Error(), "remove it") {
				t.Fatalf("error %q: want the folder's path and what to do", err)
			}
		})
	}
}

// TestUnpackWithoutAHome: with neither HOME nor XDG_CACHE_HOME, Unpack refuses, saying
// what to set, and writes nothing to the shared temporary folder.
func TestUnpackWithoutAHome(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv("HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	if dir, err := Unpack(testRelease()); err == nil || !strings.Contains(err.Error(), "set HOME") {
		t.Fatalf("Unpack without a home: %s, %v", dir, err)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Fatalf("the temporary folder holds %d entries, want none", len(entries))
	}
}

// TestUnpackRefusesAParentOthersWrite: the cache's own eva folder, writable by others,
// is refused: whoever may write it may swap the release's folder after the check.
func TestUnpackRefusesAParentOthersWrite(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	if err := os.MkdirAll(filepath.Join(cache, "eva"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(cache, "eva"), 0o777); err != nil {
		t.Fatal(err)
	}
	if dir, err := Unpack(testRelease()); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Fatalf("Unpack under a world-writable folder: %s, %v", dir, err)
	}
}

// TestUnpackRefusesACacheOthersMayRename: a cache folder (XDG_CACHE_HOME) that others may
// write without the sticky bit is refused before any release is unpacked: whoever may write
// it may rename eva/ away after the checks and put a folder of theirs in its place.
func TestUnpackRefusesACacheOthersMayRename(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(shared, "cache")
	if err := os.Mkdir(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", cache)
	if dir, err := Unpack(testRelease()); err == nil || !strings.Contains(err.Error(), shared+": writable by others") {
		t.Fatalf("Unpack below a folder others may write: %s, %v", dir, err)
	}
	if entries, _ := os.ReadDir(filepath.Join(cache, "eva", "release")); len(entries) != 0 {
		t.Fatalf("the cache holds %d releases, want none", len(entries))
	}
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if _, err := Unpack(testRelease()); err != nil {
		t.Fatalf("below a sticky folder, as /tmp is: %v", err)
	}
}
