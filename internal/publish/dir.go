package publish

import (
	"bytes"
	"fmt"
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
	mu      sync.Mutex
	written map[string]bool
	// folders are those Put has made sure of: the files of a folder this render
	// created need no reading first, nor Finish a look inside.
	folders *folders
}

// OpenDir checks the removals a render of codes would make in dir and prepares it.
func OpenDir(dir string, codes []string, safety Safety) (*Dir, error) {
	existing, err := existingTenants(dir)
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
		return os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
	})
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &Dir{dir: dir, written: map[string]bool{}, folders: newFolders(dir)}, nil
}

func existingTenants(dir string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(dir, render.TenantsDir))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(dir, render.TenantsDir, e.Name(), render.ManifestsFile)); e.IsDir() && err == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Put writes one file unless it already holds the same bytes. It is safe for
// concurrent use.
func (d *Dir) Put(f render.File) error {
	if err := checkFilePath(f.Path); err != nil {
		return err
	}
	full := filepath.Join(d.dir, filepath.FromSlash(f.Path))
	d.mu.Lock()
	d.written[f.Path] = true
	d.mu.Unlock()
	created, err := d.folders.ensure(filepath.Dir(full))
	if err != nil {
		return err
	}
	if !created {
		if cur, err := os.ReadFile(full); err == nil && bytes.Equal(cur, f.Data) {
			return nil
		}
	}
	if err := overwriteFile(full, f.Data); err != nil {
		return fmt.Errorf("writing %s: %w", full, err)
	}
	return nil
}

// Finish removes files under flux/ and tenants/ that this render did not write. The
// folders it made are not read: they hold only what it wrote.
func (d *Dir) Finish() error {
	var stale []string
	for _, top := range append([]string{render.TenantsDir}, render.DeliveryDirs...) {
		root := filepath.Join(d.dir, top)
		err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
			if os.IsNotExist(err) {
				return filepath.SkipDir
			}
			if err != nil {
				return err
			}
			if e.IsDir() {
				// A folder this render made holds only what it wrote.
				if d.folders.created(p) {
					return filepath.SkipDir
				}
				return nil
			}
			rel, _ := filepath.Rel(d.dir, p)
			if rel = filepath.ToSlash(rel); !d.written[rel] {
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
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("removing %s: %w", p, err)
		}
		removeEmptyParents(d.dir, filepath.Dir(p))
	}
	return nil
}
