//go:build unix

package publish

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aidonow/eva/internal/render"
)

// hostileOut makes <tmp>/out with a victim folder and a victim file beside it, and
// returns the three paths.
func hostileOut(t *testing.T) (out, victimDir, victimFile string) {
	t.Helper()
	tmp := t.TempDir()
	out, victimDir, victimFile = filepath.Join(tmp, "out"), filepath.Join(tmp, "victim"), filepath.Join(tmp, "victim2.txt")
	for _, d := range []string{out, victimDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(victimFile, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return out, victimDir, victimFile
}

// renderInto renders two files of tenant eva-abc and the root kustomization into out
// as a plain folder, failing the test if it blocks.
func renderInto(t *testing.T, out string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		d, err := OpenDir(out, []string{"ABC"}, Safety{AllowMassDelete: true})
		if err == nil {
			for _, f := range []render.File{
				{Path: render.RootKustomization, Data: []byte("kind: Kustomization\n")},
				{Path: "flux/eva-abc.yaml", Data: []byte("kind: Kustomization # abc\n")},
				{Path: "tenants/eva-abc/manifests.yaml", Data: []byte("kind: Namespace # abc\n")},
			} {
				if err = d.Put(f); err != nil {
					break
				}
			}
		}
		if err == nil {
			err = d.Finish()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("render blocked")
		return nil
	}
}

// TestDirRefusesLinksAndSpecialFiles: a render into a plain folder never writes through
// a symlink (leading out of the folder or not) nor into a FIFO: it is refused with the
// path and the reason before anything is written, and what the link points to is left
// as it was.
func TestDirRefusesLinksAndSpecialFiles(t *testing.T) {
	for name, tc := range map[string]struct {
		setup func(t *testing.T, out, victimDir, victimFile string)
		where string
		want  string
	}{
		"delivery folder linked out": {where: "flux", want: "is a symlink", setup: func(t *testing.T, out, victimDir, _ string) {
			mustSymlink(t, "../victim", filepath.Join(out, "flux"))
		}},
		"root kustomization linked out": {where: render.RootKustomization, want: "is a symlink", setup: func(t *testing.T, out, _, _ string) {
			mustSymlink(t, "../victim2.txt", filepath.Join(out, render.RootKustomization))
		}},
		"tenants linked inside": {where: "tenants", want: "is a symlink", setup: func(t *testing.T, out, _, _ string) {
			if err := os.Mkdir(filepath.Join(out, "elsewhere"), 0o755); err != nil {
				t.Fatal(err)
			}
			mustSymlink(t, "elsewhere", filepath.Join(out, "tenants"))
		}},
		"tenant file linked out": {where: "manifests.yaml", want: "is a symlink", setup: func(t *testing.T, out, _, victimFile string) {
			if err := os.MkdirAll(filepath.Join(out, "tenants", "eva-abc"), 0o755); err != nil {
				t.Fatal(err)
			}
			mustSymlink(t, victimFile, filepath.Join(out, "tenants", "eva-abc", "manifests.yaml"))
		}},
		"root kustomization a FIFO": {where: render.RootKustomization, want: "is a FIFO", setup: func(t *testing.T, out, _, _ string) {
			if err := syscall.Mkfifo(filepath.Join(out, render.RootKustomization), 0o644); err != nil {
				t.Skip(err)
			}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			out, victimDir, victimFile := hostileOut(t)
			tc.setup(t, out, victimDir, victimFile)
			before := listTree(t, out)
			err := renderInto(t, out)
			if err == nil || !strings.Contains(err.Error(), tc.where) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("render: %v, want %s refused: %s", err, tc.where, tc.want)
			}
			if entries, _ := os.ReadDir(victimDir); len(entries) != 0 {
				t.Errorf("wrote %d files into the folder a link points to", len(entries))
			}
			if data, _ := os.ReadFile(victimFile); string(data) != "precious\n" {
				t.Errorf("overwrote the file a link points to: %q", data)
			}
			if after := listTree(t, out); after != before {
				t.Errorf("wrote into the output folder before refusing:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// TestReadDirRefusesLinksAndFIFOs: `evactl diff --dir` reads the published tree inside
// the folder only: a file read through a symlink, or a FIFO, is refused with its path
// and the reason (no content, no hang).
func TestReadDirRefusesLinksAndFIFOs(t *testing.T) {
	for name, tc := range map[string]struct {
		setup func(t *testing.T, out, victimFile string)
		want  string
	}{
		"file linked out": {want: "is a symlink", setup: func(t *testing.T, out, victimFile string) {
			mustSymlink(t, victimFile, filepath.Join(out, "tenants", "eva-abc", "manifests.yaml"))
		}},
		"folder linked out": {want: "is a symlink", setup: func(t *testing.T, out, _ string) {
			mustSymlink(t, "../../../victim", filepath.Join(out, "tenants", "eva-abc", "workloads"))
		}},
		"FIFO": {want: "is a FIFO", setup: func(t *testing.T, out, _ string) {
			if err := syscall.Mkfifo(filepath.Join(out, "tenants", "eva-abc", "manifests.yaml"), 0o644); err != nil {
				t.Skip(err)
			}
		}},
		// A hard link reads the outside file's content under a name inside the folder.
		"file hard-linked out": {want: "is a hard link (2 links)", setup: func(t *testing.T, out, victimFile string) {
			if err := os.Link(victimFile, filepath.Join(out, "tenants", "eva-abc", "manifests.yaml")); err != nil {
				t.Skip(err)
			}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			out, victimDir, victimFile := hostileOut(t)
			if err := os.WriteFile(filepath.Join(victimDir, "manifests.yaml"), []byte("secret: precious\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(out, "tenants", "eva-abc"), 0o755); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, out, victimFile)
			done := make(chan error, 1)
			go func() {
				tree, err := ReadDir(out)
				for p, data := range tree {
					if strings.Contains(string(data), "precious") {
						t.Errorf("read %s through a link", p)
					}
				}
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("ReadDir blocked")
			}
			if err == nil || !strings.Contains(err.Error(), filepath.Join("tenants", "eva-abc")) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ReadDir: %v, want %s refused", err, tc.want)
			}
		})
	}
}

// TestLocalRepoRefusesCommittedSymlink: in git mode, a symlink committed in the
// repository (and checked out) where Eva writes is refused, by a full render and by a
// partial one, and nothing is written through it.
func TestLocalRepoRefusesCommittedSymlink(t *testing.T) {
	for name, publish := range map[string]func(l *LocalRepo, u Update) error{
		"full": func(l *LocalRepo, u Update) error {
			for _, files := range u.Tenants {
				for _, f := range files {
					if err := l.Put(f); err != nil {
						return err
					}
				}
			}
			_, err := l.Commit(Safety{AllowMassDelete: true}, DefaultAuthor, "render")
			return err
		},
		"partial": func(l *LocalRepo, u Update) error {
			_, err := l.PublishChanges(u, Safety{}, DefaultAuthor, "render")
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			tmp := t.TempDir()
			repo, victim := filepath.Join(tmp, "repo"), filepath.Join(tmp, "victim")
			for _, d := range []string{repo, victim} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			gitCLI(t, repo, "init", "-q", "-b", "main")
			mustSymlink(t, "../victim", filepath.Join(repo, "flux"))
			mustSymlink(t, "../victim", filepath.Join(repo, "tenants"))
			gitCLI(t, repo, "add", "-A")
			gitCLI(t, repo, "-c", "user.name=x", "-c", "user.email=x@example.com", "commit", "-q", "-m", "hostile")
			l, err := OpenLocal(repo)
			if err != nil {
				t.Fatal(err)
			}
			err = publish(l, renderUpdate(t, true, tenantSpec{code: "SYMAAA"}))
			if err == nil || (!strings.Contains(err.Error(), "is a symlink") && !strings.Contains(err.Error(), "a symbolic link")) {
				t.Errorf("publish: %v, want the committed symlink refused", err)
			}
			if entries, _ := os.ReadDir(victim); len(entries) != 0 {
				t.Errorf("wrote %d files through the committed symlink", len(entries))
			}
		})
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// listTree lists the paths under dir (links not followed), one a line.
func listTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b.WriteString(rel + " " + e.Type().String() + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
