package overlay

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/aidonow/eva/internal/fileguard"
)

// maxOverlayFile bounds each file of an overlay folder: settings, kustomization and
// patches are a few kilobytes, and a larger file is a mistake or an attempt to make
// Eva read something that is not an overlay.
const maxOverlayFile = 1 << 20

// errOutside is a path that leads out of the overlay folder.
var errOutside = errors.New("leads outside the overlay folder")

// overlayDir is an environment's overlay folder opened as an os.Root: the files Eva
// reads by a name the overlay gives (its settings, its kustomization, the patch files
// that names) are read inside it. A repository is not trusted: absolute paths, '..'
// and symlinks leading out of the folder are refused, and so is anything not a
// regular file. Symlinks that stay inside are followed, because the operator reads its
// environment from a ConfigMap volume, whose files are such symlinks.
type overlayDir struct {
	root *os.Root
	// path names the folder in messages.
	path string
	// files holds every file read, by the name the overlay gave it: what the
	// environment was loaded from, byte for byte (Environment.Files).
	files map[string][]byte
}

// openOverlayDir opens dir as the overlay folder.
func openOverlayDir(dir string) (*overlayDir, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening overlay folder: %w", err)
	}
	return &overlayDir{root: r, path: dir, files: map[string][]byte{}}, nil
}

// openOverlayIn opens the folder sub of base as the overlay folder, refusing a sub
// that leads out of base (a symlinked environment folder pointing elsewhere).
func openOverlayIn(base, sub string) (*overlayDir, error) {
	r, err := os.OpenRoot(base)
	if err != nil {
		return nil, fmt.Errorf("opening overlays folder: %w", err)
	}
	defer r.Close()
	s, err := r.OpenRoot(sub)
	if err != nil {
		if escapes(err) {
			return nil, fmt.Errorf("%s: %w", filepath.Join(base, sub), errOutside)
		}
		return nil, fmt.Errorf("opening overlay folder: %w", err)
	}
	return &overlayDir{root: s, path: filepath.Join(base, sub), files: map[string][]byte{}}, nil
}

// close releases the folder.
func (o *overlayDir) close() { _ = o.root.Close() }

// join names a file of the folder in messages.
func (o *overlayDir) join(name string) string { return filepath.Join(o.path, name) }

// read returns the content of the regular file name inside the folder. Its errors say
// what is wrong with the file, never what it holds.
func (o *overlayDir) read(name string) ([]byte, error) {
	if !filepath.IsLocal(name) {
		return nil, errOutside
	}
	fi, err := o.root.Stat(name)
	if err != nil {
		return nil, rootError(err)
	}
	if err := checkRegular(fi); err != nil {
		return nil, err
	}
	// Non-blocking, so that a FIFO swapped in after the check cannot hang the open.
	f, err := o.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, rootError(err)
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !os.SameFile(fi, opened) {
		return nil, errors.New("changed while being read")
	}
	if err := checkRegular(opened); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxOverlayFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxOverlayFile {
		return nil, fmt.Errorf("is larger than %d bytes", maxOverlayFile)
	}
	o.files[filepath.ToSlash(filepath.Clean(name))] = data
	return data, nil
}

// checkRegular refuses anything but a regular file of at most maxOverlayFile bytes
// with one hard link (another name may be a file outside the folder).
func checkRegular(fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("is %s, not a regular file", fileguard.Kind(fi.Mode()))
	}
	if fi.Size() > maxOverlayFile {
		return fmt.Errorf("is larger than %d bytes", maxOverlayFile)
	}
	if why := fileguard.SoleLink(fi); why != "" {
		return fmt.Errorf("is %s: an overlay reads only files it alone holds", why)
	}
	return nil
}

// rootError names os.Root's refusal of a path leading out of the folder.
func rootError(err error) error {
	if escapes(err) {
		return errOutside
	}
	return err
}

// escapes reports whether err is os.Root refusing a path that leads out of it: the os
// package does not export that error, only its text.
func escapes(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Err != nil && pe.Err.Error() == "path escapes from parent"
}
