package fileguard

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestSoleLink: a file with a second hard link is named as one; a file alone is not.
func TestSoleLink(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no link count on this platform")
	}
	dir := t.TempDir()
	alone, linked := filepath.Join(dir, "alone"), filepath.Join(dir, "linked")
	for _, p := range []string{alone, linked} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(linked, filepath.Join(dir, "outside")); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{alone: "", linked: "a hard link (2 links)"} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := SoleLink(fi); got != want {
			t.Errorf("%s: %q, want %q", filepath.Base(p), got, want)
		}
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := Kind(fi.Mode()); !strings.Contains(got, "folder") {
		t.Errorf("a folder is %q", got)
	}
}
