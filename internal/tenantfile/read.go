package tenantfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/aidonow/eva/internal/fileguard"
	"github.com/aidonow/eva/internal/safetext"
)

// readTenantFile reads one tenant file, or says why it refuses to. Only regular files
// are read: a symbolic link is refused without reading what it points at, so a link
// such as ABCDEF.yaml -> /etc/passwd (or to a CI runner's credentials) never has its
// content parsed, echoed in a message or rendered. Links that stay inside the tenant
// folder are refused as well: what a pull request shows of a link is its target's
// name, not the tenant it publishes, and two names for one file would publish a
// tenant twice. Devices, sockets and FIFOs are refused (reading them can block or
// never end), and a file over MaxFileBytes is refused before it is read.
func readTenantFile(path, folder string) ([]byte, os.FileInfo, string) {
	info, err := os.Lstat(path)
	if err != nil {
		return nil, nil, "cannot read: " + readError(err)
	}
	switch mode := info.Mode(); {
	case mode&os.ModeSymlink != 0:
		return nil, nil, symlinkRefusal(path, folder)
	case !mode.IsRegular():
		return nil, nil, fmt.Sprintf("not a regular file (%s): tenant files must be plain files", fileguard.Kind(mode))
	case info.Size() > MaxFileBytes:
		return nil, nil, tooBig(info.Size())
	case fileguard.SoleLink(info) != "":
		// Its other name may be a file outside the folder (git carries no hard links).
		return nil, nil, fileguard.SoleLink(info) + ": tenant files must be plain files of their own"
	}
	data, problem := readChecked(path, info)
	if problem != "" {
		return nil, nil, problem
	}
	if len(data) > MaxFileBytes {
		return nil, nil, tooBig(int64(len(data)))
	}
	return data, info, ""
}

// changedWhileRead is the refusal of a file that is no longer the one Lstat checked.
const changedWhileRead = "the file changed while it was being read; refused"

// readPortably reads the file Lstat described as info, at most MaxFileBytes+1 bytes,
// through os.File: the path may have been swapped for a link or a device since Lstat,
// so only the very file that was checked is read.
func readPortably(path string, info os.FileInfo) ([]byte, string) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "cannot read: " + readError(err)
	}
	defer f.Close()
	if opened, err := f.Stat(); err != nil || !os.SameFile(info, opened) {
		return nil, changedWhileRead
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, "cannot read: " + readError(err)
	}
	return data, ""
}

// symlinkRefusal explains why a link is refused. The target is resolved (which reads
// link names, never file content) only to tell the two cases apart; an outside target
// is not named, since its path may itself be sensitive.
func symlinkRefusal(path, folder string) string {
	target, err := filepath.EvalSymlinks(path)
	root, rerr := filepath.EvalSymlinks(folder)
	if err != nil || rerr != nil || !within(root, target) {
		return "symbolic link to a file outside the tenant folder: refused without reading it"
	}
	rel, _ := filepath.Rel(root, target)
	return fmt.Sprintf("symbolic link to %s: tenant files must be regular files (a pull request shows a link's target name, not its content); replace the link by the file",
		safetext.Value(filepath.ToSlash(rel)))
}

// within reports whether path lies inside (or is) dir; both are resolved and absolute
// or both relative to the same working directory.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// readError drops the path from an I/O error: the problem already names the file.
func readError(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}
