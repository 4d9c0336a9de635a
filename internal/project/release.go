package project

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// CheckRelease refuses to run evactl of one release (running, "0.2.0") in a fleet
// that names another: the environments and module charts evactl carries are its own
// release's. A development build (running "") is let through: it carries its checkout's.
func (f *Fleet) CheckRelease(running string) error {
	if f.Release == "" || running == "" {
		return nil
	}
	want := strings.TrimPrefix(f.Release, "v")
	if want == running {
		return nil
	}
	return fmt.Errorf("%s: eva: this fleet uses Eva %s and this evactl is %s: install its release (go install github.com/aidonow/eva/cmd/evactl@v%s), or change eva: as docs/upgrade.md says", f.Path, want, running, want)
}

// Unpack writes the release files fsys holds (the environments and module charts
// evactl carries) to a folder of the user's cache named by their digest, once, and
// returns it: environments and charts are read from disk, by the same code as the
// fleet's own. A folder is written under a temporary name and renamed into place, so
// it is whole or absent.
func Unpack(fsys fs.FS) (string, error) {
	digest, err := digestFS(fsys)
	if err != nil {
		return "", err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	parent := filepath.Join(base, "eva", "release")
	dir := filepath.Join(parent, digest[:16])
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("unpacking the release's environments and charts: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, ".unpack-")
	if err != nil {
		return "", fmt.Errorf("unpacking the release's environments and charts: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.CopyFS(tmp, fsys); err != nil {
		return "", fmt.Errorf("unpacking the release's environments and charts: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another evactl unpacked the same release first.
		if _, serr := os.Stat(dir); serr == nil {
			return dir, nil
		}
		return "", fmt.Errorf("unpacking the release's environments and charts: %w", err)
	}
	return dir, nil
}

// digestFS hashes every file's path and content, in the lexical order WalkDir gives.
func digestFS(fsys fs.FS) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%d:%s\n%d\n", len(path), path, len(data))
		h.Write(data)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("reading the release's files: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
