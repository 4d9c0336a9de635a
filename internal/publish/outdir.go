package publish

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/aidonow/eva/internal/fileguard"
)

// outDir is a folder Eva writes a tree into or reads one from (a plain output folder,
// a git worktree), opened as an os.Root so that nothing is read or written outside it.
// The folder may come from a hostile repository, so Eva also never goes through a
// symlink anywhere below it, and reads and writes only folders and regular files: a
// symlinked flux/ or kustomization.yaml would otherwise send a render's files, or a
// diff's reads, to a file of the machine running Eva, and a FIFO would hang it.
type outDir struct {
	root *os.Root
	// path names the folder in messages.
	path string
}

// openOutDir opens dir, which must exist.
func openOutDir(dir string) (*outDir, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", dir, err)
	}
	return &outDir{root: r, path: dir}, nil
}

// close releases the folder.
func (o *outDir) close() { _ = o.root.Close() }

// full names rel (a path of the folder, in the OS's form) in messages.
func (o *outDir) full(rel string) string { return filepath.Join(o.path, rel) }

// refuse is the error for something found at rel that Eva will not go through.
func (o *outDir) refuse(rel, what string) error {
	return fmt.Errorf("%s: %s; Eva reads and writes only folders and regular files below %s, never through a link", o.full(rel), what, o.path)
}

// describe says what a file that is neither a folder nor a regular file is.
func describe(m fs.FileMode) string {
	if m.IsDir() {
		return "is a folder, not a file"
	}
	return "is " + fileguard.Kind(m)
}

// checkDir reports whether the folder rel exists, refusing anything else found there.
func (o *outDir) checkDir(rel string) (bool, error) {
	fi, err := o.root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking %s: %w", o.full(rel), err)
	}
	if fi.IsDir() {
		return true, nil
	}
	if fi.Mode().IsRegular() {
		return false, o.refuse(rel, "is a file where a folder is expected")
	}
	return false, o.refuse(rel, describe(fi.Mode()))
}

// checkFile returns the file at rel (nil when there is none), refusing anything but a
// regular file.
func (o *outDir) checkFile(rel string) (fs.FileInfo, error) {
	fi, err := o.root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checking %s: %w", o.full(rel), err)
	}
	if !fi.Mode().IsRegular() {
		return nil, o.refuse(rel, describe(fi.Mode()))
	}
	return fi, nil
}

// checkPaths checks, before anything is written, every path (slash-separated) Eva is
// about to write or remove: each folder on the way is a folder or missing, and the
// file itself a regular file or missing.
func (o *outDir) checkPaths(paths []string) error {
	seen := map[string]bool{".": true}
	for _, p := range paths {
		rel := filepath.FromSlash(p)
		if err := o.checkFolders(filepath.Dir(rel), seen); err != nil {
			return err
		}
		if _, err := o.checkFile(rel); err != nil {
			return err
		}
	}
	return nil
}

// checkFolders checks dir and its parents, each once.
func (o *outDir) checkFolders(dir string, seen map[string]bool) error {
	if seen[dir] {
		return nil
	}
	if err := o.checkFolders(filepath.Dir(dir), seen); err != nil {
		return err
	}
	seen[dir] = true
	_, err := o.checkDir(dir)
	return err
}

// checkTree checks, before anything is written, the whole of the trees under tops
// (slash-separated) and the files named: folders and regular files only.
func (o *outDir) checkTree(files, tops []string) error {
	if err := o.checkPaths(files); err != nil {
		return err
	}
	for _, top := range tops {
		exists, err := o.checkDir(filepath.FromSlash(top))
		if err != nil {
			return err
		}
		if !exists {
			continue
		}
		err = fs.WalkDir(o.root.FS(), top, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !e.IsDir() && !e.Type().IsRegular() {
				return o.refuse(filepath.FromSlash(p), describe(e.Type()))
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// read returns the content of the regular file rel; ok is false when there is none.
func (o *outDir) read(rel string) (data []byte, ok bool, err error) {
	fi, err := o.checkFile(rel)
	if fi == nil || err != nil {
		return nil, false, err
	}
	// Non-blocking, so that a FIFO swapped in after the check cannot hang the open.
	f, err := o.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false, fmt.Errorf("reading %s: %w", o.full(rel), err)
	}
	defer f.Close()
	opened, err := o.sameRegular(rel, f, fi)
	if err != nil {
		return nil, false, err
	}
	if err := o.soleLink(rel, opened); err != nil {
		return nil, false, err
	}
	if data, err = io.ReadAll(f); err != nil {
		return nil, false, fmt.Errorf("reading %s: %w", o.full(rel), err)
	}
	return data, true, nil
}

// sameRegular checks that the file opened at rel is a regular file, and the one
// checked before (fi) when there was one, and returns what the open file is.
func (o *outDir) sameRegular(rel string, f *os.File, fi fs.FileInfo) (fs.FileInfo, error) {
	opened, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("checking %s: %w", o.full(rel), err)
	}
	if !opened.Mode().IsRegular() {
		return nil, o.refuse(rel, describe(opened.Mode()))
	}
	if fi != nil && !os.SameFile(fi, opened) {
		return nil, o.refuse(rel, "changed while being opened")
	}
	return opened, nil
}

// holds reports whether rel is a regular file holding exactly data.
func (o *outDir) holds(rel string, data []byte) (bool, error) {
	cur, ok, err := o.read(rel)
	return ok && bytes.Equal(cur, data), err
}

// write makes the file rel hold data, with mode 0644 when it is created. Its folder
// must exist. A file already there must be a regular file Eva alone owns (one link).
//
// The order matters because os.Root follows a symlink inside the root even with
// O_NOFOLLOW: opening with O_TRUNC would empty whatever file a link swapped in after the
// render's checks points to. So the file is checked through the root first, opened
// without truncating, checked again once open to be the file checked, and only then
// truncated. A missing file is created exclusively, so that a link planted meanwhile
// makes the open fail instead of being followed.
func (o *outDir) write(rel string, data []byte) error {
	checked, err := o.root.Lstat(rel)
	flags := os.O_WRONLY | syscall.O_NONBLOCK
	switch {
	case errors.Is(err, fs.ErrNotExist):
		checked, flags = nil, flags|os.O_CREATE|os.O_EXCL
	case err != nil:
		return fmt.Errorf("writing %s: %w", o.full(rel), err)
	case !checked.Mode().IsRegular():
		return o.refuse(rel, describe(checked.Mode()))
	default:
		if err := o.soleLink(rel, checked); err != nil {
			return err
		}
	}
	f, err := o.root.OpenFile(rel, flags, 0o644)
	if checked == nil && errors.Is(err, fs.ErrExist) {
		return o.refuse(rel, "appeared while being created")
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", o.full(rel), err)
	}
	err = o.replaceContent(rel, f, checked, data)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("writing %s: %w", o.full(rel), cerr)
	}
	return err
}

// replaceContent makes the file opened at rel, checked before as checked (nil when it
// was created), hold data, once it is known to be that file and to have one link.
func (o *outDir) replaceContent(rel string, f *os.File, checked fs.FileInfo, data []byte) error {
	opened, err := o.sameRegular(rel, f, checked)
	if err != nil {
		return err
	}
	// Again on the open file: a link made between the check and the open.
	if err := o.soleLink(rel, opened); err != nil {
		return err
	}
	if checked != nil {
		if err := f.Truncate(0); err != nil {
			return fmt.Errorf("writing %s: %w", o.full(rel), err)
		}
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", o.full(rel), err)
	}
	return nil
}

// soleLink refuses the regular file at rel (described by fi) when it has more than one
// hard link: the other may be a path outside the folder (a file of the machine running
// Eva), which reading or writing the file would reach.
func (o *outDir) soleLink(rel string, fi fs.FileInfo) error {
	if why := fileguard.SoleLink(fi); why != "" {
		return fmt.Errorf("%s: is %s: Eva reads and writes only files it alone owns below %s", o.full(rel), why, o.path)
	}
	return nil
}

// remove removes the file rel (not what a link there points to), then the folders it
// leaves empty up to the root; a missing file is not an error.
func (o *outDir) remove(rel string) error {
	if err := o.root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", o.full(rel), err)
	}
	for dir := filepath.Dir(rel); dir != "."; dir = filepath.Dir(dir) {
		if o.root.Remove(dir) != nil {
			return nil // not empty
		}
	}
	return nil
}
