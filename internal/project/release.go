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
//
// A folder found under the digest's name is trusted only when it is what this evactl
// would write: its content hashes to the digest, and it and its parents are the user's
// own, written by nobody else (owned by the user, neither group- nor world-writable, no
// symlinks), below folders nobody else may rename it in (checkCacheBase). Otherwise whoever wrote it first (another user of a shared cache, or a
// planted schema that lets every value through) would decide what evactl checks
// tenants against. There is no fallback to the shared temporary folder: without HOME
// (or XDG_CACHE_HOME) evactl says so and stops.
func Unpack(fsys fs.FS) (string, error) {
	digest, err := digestFS(fsys, nil)
	if err != nil {
		return "", err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("unpacking the release's environments and charts: %w (set HOME, or XDG_CACHE_HOME, to a folder of your own)", err)
	}
	eva := filepath.Join(base, "eva")
	parent := filepath.Join(eva, "release")
	dir := filepath.Join(parent, digest[:16])
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", fmt.Errorf("unpacking the release's environments and charts: %w", err)
	}
	if err := checkCacheBase(base); err != nil {
		return "", err
	}
	for _, d := range []string{eva, parent} {
		info, err := os.Lstat(d)
		if err != nil {
			return "", fmt.Errorf("unpacking the release's environments and charts: %w", err)
		}
		if why := untrusted(info); why != "" {
			return "", fmt.Errorf("%s: %s: evactl keeps the release's files only in a folder of yours that nobody else writes", d, why)
		}
	}
	if _, err := os.Lstat(dir); err == nil {
		if err := checkUnpacked(dir, digest); err != nil {
			return "", fmt.Errorf("%s: %w: it is not the folder this evactl unpacks; remove it and run evactl again", dir, err)
		}
		return dir, nil
	}
	tmp, err := os.MkdirTemp(parent, ".unpack-")
	if err != nil {
		return "", fmt.Errorf("unpacking the release's environments and charts: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.CopyFS(tmp, fsys); err != nil {
		return "", fmt.Errorf("unpacking the release's environments and charts: %w", err)
	}
	if err := keepToOwner(tmp); err != nil {
		return "", fmt.Errorf("unpacking the release's environments and charts: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another evactl unpacked the same release first.
		if cerr := checkUnpacked(dir, digest); cerr == nil {
			return dir, nil
		}
		return "", fmt.Errorf("unpacking the release's environments and charts: %w", err)
	}
	return dir, nil
}

// checkCacheBase refuses a cache folder another user could rename or replace the
// release's folder in: the folder (its links resolved) is the user's or root's, and no
// folder from it up that others may write lacks the sticky bit (as /tmp has it), so
// that nobody else can move what is in it. The owners of the folders above are not
// checked: inside a user namespace (the end-to-end suite's egress check) root's own
// folders show as the overflow user, like any other user's.
func checkCacheBase(base string) error {
	resolved, err := filepath.EvalSymlinks(base)
	if err != nil {
		return fmt.Errorf("unpacking the release's environments and charts: %w", err)
	}
	for d := resolved; ; d = filepath.Dir(d) {
		info, err := os.Lstat(d)
		if err != nil {
			return fmt.Errorf("unpacking the release's environments and charts: %w", err)
		}
		if uid, ok := ownerOf(info); ok && d == resolved && uid != os.Getuid() && uid != 0 {
			return fmt.Errorf("%s: owned by user %d: evactl keeps the release's files only below folders of yours or root's (set XDG_CACHE_HOME)", d, uid)
		}
		if info.Mode().Perm()&0o022 != 0 && info.Mode()&fs.ModeSticky == 0 {
			return fmt.Errorf("%s: writable by others (mode %v) without the sticky bit: another user could replace the release's folder below it (set XDG_CACHE_HOME)", d, info.Mode().Perm())
		}
		if parent := filepath.Dir(d); parent == d {
			return nil
		}
	}
}

// untrusted says why a file of the release's folder may have been written by someone
// other than the user running evactl; empty when it cannot.
func untrusted(info fs.FileInfo) string {
	if uid, ok := ownerOf(info); ok && uid != os.Getuid() {
		return fmt.Sprintf("owned by user %d, not by you (%d)", uid, os.Getuid())
	}
	if info.Mode().Perm()&0o022 != 0 {
		return fmt.Sprintf("writable by others (mode %v)", info.Mode().Perm())
	}
	if t := info.Mode().Type(); t != 0 && !t.IsDir() {
		return "not a regular file or folder (" + t.String() + ")"
	}
	return ""
}

// checkUnpacked holds a folder found under the release's name to what Unpack writes:
// every entry trusted (untrusted), and the content the release's digest.
func checkUnpacked(dir, digest string) error {
	info, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if why := untrusted(info); why != "" {
		return fmt.Errorf("%s", why)
	}
	got, err := digestFS(os.DirFS(dir), func(path string, d fs.DirEntry) error {
		info, err := d.Info()
		if err != nil {
			return err
		}
		if why := untrusted(info); why != "" {
			return fmt.Errorf("%s: %s", path, why)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if got != digest {
		return fmt.Errorf("its content has digest %s, want %s", got[:16], digest[:16])
	}
	return nil
}

// keepToOwner takes group and world write off every file and folder of dir, whatever
// the umask gave them, so that checkUnpacked trusts the folder Unpack wrote.
func keepToOwner(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.Chmod(path, info.Mode().Perm()&^0o022)
	})
}

// digestFS hashes every file's path and content, in the lexical order WalkDir gives;
// check, when set, is asked about every entry (folders too) before it is read.
func digestFS(fsys fs.FS, check func(path string, d fs.DirEntry) error) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if check != nil {
			if err := check(path, d); err != nil {
				return err
			}
		}
		if d.IsDir() {
			return nil
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
