//go:build unix

package publish

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aidonow/eva/internal/render"
)

// TestOutDirWriteRefusesHardLink: a file of the output folder hard-linked to a file
// outside it is the outside file; writing it would change that file. write refuses it
// with the file and the reason, and the outside file keeps its content.
func TestOutDirWriteRefusesHardLink(t *testing.T) {
	out, _, victimFile := hostileOut(t)
	if err := os.Link(victimFile, filepath.Join(out, "planted.yaml")); err != nil {
		t.Skip(err) // a file system without hard links
	}
	o, err := openOutDir(out)
	if err != nil {
		t.Fatal(err)
	}
	defer o.close()
	err = o.write("planted.yaml", []byte("kind: Namespace\n"))
	t.Logf("write: %v", err)
	if data, _ := os.ReadFile(victimFile); string(data) != "precious\n" {
		t.Errorf("wrote through the hard link: the outside file now holds %q", data)
	}
	if err == nil || !strings.Contains(err.Error(), filepath.Join(out, "planted.yaml")) || !strings.Contains(err.Error(), "is a hard link (2 links)") {
		t.Errorf("write: %v, want %s refused as a hard link", err, filepath.Join(out, "planted.yaml"))
	}
}

// TestOutDirWriteRefusesSymlink: a symlink swapped in after the render's checks (write
// is called on it directly here) is refused, and the file it points to, inside the
// folder, is neither truncated nor written: os.Root follows a link inside the root even
// when asked not to.
func TestOutDirWriteRefusesSymlink(t *testing.T) {
	out, _, _ := hostileOut(t)
	target := filepath.Join(out, "kustomization.yaml")
	if err := os.WriteFile(target, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, "kustomization.yaml", filepath.Join(out, "link.yaml"))
	mustSymlink(t, "missing.yaml", filepath.Join(out, "dangling.yaml"))
	o, err := openOutDir(out)
	if err != nil {
		t.Fatal(err)
	}
	defer o.close()
	for _, name := range []string{"link.yaml", "dangling.yaml"} {
		err := o.write(name, []byte("planted\n"))
		if err == nil || !strings.Contains(err.Error(), filepath.Join(out, name)) || !strings.Contains(err.Error(), "is a symlink") {
			t.Errorf("write %s: %v, want it refused as a symlink", name, err)
		}
	}
	if data, _ := os.ReadFile(target); string(data) != "precious\n" {
		t.Errorf("wrote through the symlink: %s now holds %q", target, data)
	}
	if _, err := os.Lstat(filepath.Join(out, "missing.yaml")); err == nil {
		t.Error("created the file a dangling symlink points to")
	}
}

// TestOutDirWriteReplacesContent: a regular file Eva owns is rewritten in place, a
// longer content by a shorter one included (the file is truncated after the checks),
// and a missing file is created with mode 0644.
func TestOutDirWriteReplacesContent(t *testing.T) {
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "a.yaml"), []byte("a much longer content than the next\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := openOutDir(out)
	if err != nil {
		t.Fatal(err)
	}
	defer o.close()
	for _, name := range []string{"a.yaml", "b.yaml"} {
		if err := o.write(name, []byte("short\n")); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(out, name))
		if err != nil || string(data) != "short\n" {
			t.Errorf("%s holds %q (%v), want %q", name, data, err, "short\n")
		}
	}
	if fi, err := os.Stat(filepath.Join(out, "b.yaml")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("created b.yaml: %v, mode %v, want 0644", err, fi.Mode())
	}
}

// TestDirRefusesHardLinkedFile: a render into a plain folder whose root kustomization
// is a hard link to a file outside it is refused, naming the file, and the outside file
// is left as it was.
func TestDirRefusesHardLinkedFile(t *testing.T) {
	out, _, victimFile := hostileOut(t)
	if err := os.Link(victimFile, filepath.Join(out, render.RootKustomization)); err != nil {
		t.Skip(err)
	}
	err := renderInto(t, out)
	if data, _ := os.ReadFile(victimFile); string(data) != "precious\n" {
		t.Errorf("the render wrote through the hard link: the outside file now holds %q", data)
	}
	if err == nil || !strings.Contains(err.Error(), filepath.Join(out, render.RootKustomization)) || !strings.Contains(err.Error(), "is a hard link") {
		t.Errorf("render: %v, want the hard-linked %s refused", err, render.RootKustomization)
	}
}
