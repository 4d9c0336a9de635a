package publish

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/aidonow/eva/internal/render"
)

// Dir writes a render into a plain folder (no git): files are written as they are
// rendered, unchanged files are left alone, and files of tenants no longer rendered
// are removed at the end. The safety checks run before anything is written, from the
// tenant codes about to be rendered.
type Dir struct {
	dir     string
	out     *outDir
	mu      sync.Mutex
	written map[string]bool
	// folders are those Put has made sure of: the files of a folder this render
	// created need no reading first, nor Finish a look inside.
	folders *folders
}

// OpenDir checks the removals a render of codes would make in dir and prepares it.
// Before anything is written, the tree Eva writes into (the root kustomization and
// every file under the folders it owns) must hold only folders and regular files: a
// symlink, FIFO or device there is refused with its path.
func OpenDir(dir string, codes []string, safety Safety) (*Dir, error) {
	out, err := openOutDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		out, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	if out != nil {
		if err := out.checkTree([]string{render.RootKustomization}, ownedDirs()); err != nil {
			return nil, err
		}
	}
	existing, err := existingTenants(out)
	if err != nil {
		return nil, err
	}
	rendered := map[string]bool{}
	for _, c := range codes {
		rendered[render.DirName(c)] = true
	}
	plan := &Plan{Published: len(existing), Rendered: len(rendered)}
	for _, d := range existing {
		if !rendered[d] {
			plan.Removed = append(plan.Removed, d)
		}
	}
	err = plan.Check(safety, func(p string) ([]byte, error) {
		if out == nil {
			return nil, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
		}
		data, ok, err := out.read(filepath.FromSlash(p))
		if err == nil && !ok {
			err = fmt.Errorf("%s: %w", out.full(filepath.FromSlash(p)), fs.ErrNotExist)
		}
		return data, err
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if out, err = openOutDir(dir); err != nil {
			return nil, err
		}
	}
	return &Dir{dir: dir, out: out, written: map[string]bool{}, folders: newFolders(out)}, nil
}

// ownedDirs are the folders whose every file Eva writes (or removes).
func ownedDirs() []string { return append([]string{render.TenantsDir}, render.DeliveryDirs...) }

// existingTenants lists the tenant folders of out (none when out is nil).
func existingTenants(out *outDir) ([]string, error) {
	if out == nil {
		return nil, nil
	}
	entries, err := fs.ReadDir(out.root.FS(), render.TenantsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", out.path, err)
	}
	var found []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		fi, err := out.checkFile(filepath.Join(render.TenantsDir, e.Name(), render.ManifestsFile))
		if err != nil {
			return nil, err
		}
		if fi != nil {
			found = append(found, e.Name())
		}
	}
	return found, nil
}

// Put writes one file unless it already holds the same bytes. It is safe for
// concurrent use.
func (d *Dir) Put(f render.File) error {
	if err := checkFilePath(f.Path); err != nil {
		return err
	}
	rel := filepath.FromSlash(f.Path)
	d.mu.Lock()
	d.written[f.Path] = true
	d.mu.Unlock()
	created, err := d.folders.ensure(filepath.Dir(rel))
	if err != nil {
		return err
	}
	if !created {
		same, err := d.out.holds(rel, f.Data)
		if err != nil || same {
			return err
		}
	}
	return d.out.write(rel, f.Data)
}

// Finish removes files under flux/ and tenants/ that this render did not write. The
// folders it made are not read: they hold only what it wrote.
func (d *Dir) Finish() error {
	var stale []string
	for _, top := range ownedDirs() {
		exists, err := d.out.checkDir(top)
		if err != nil {
			return err
		}
		if !exists {
			continue
		}
		err = fs.WalkDir(d.out.root.FS(), top, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				// A folder this render made holds only what it wrote.
				if d.folders.created(filepath.FromSlash(p)) {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.written[p] {
				stale = append(stale, p)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	slices.Sort(stale)
	for _, p := range stale {
		if err := d.out.remove(filepath.FromSlash(p)); err != nil {
			return err
		}
	}
	return nil
}
