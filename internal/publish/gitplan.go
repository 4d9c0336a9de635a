package publish

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/aidonow/eva/internal/gitrepo"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/safetext"
)

// ErrForeignEntry is a published tree's entry Eva did not write and will not carry on or
// replace: under tenants/ only tenant folders, named by capsule code, holding files.
var ErrForeignEntry = errors.New("not an entry Eva publishes")

// tenantDirRE is the name of a tenant's folder: its capsule code in lower case
// (render.DirName of ^[A-Z]{6}$).
var tenantDirRE = regexp.MustCompile(`^[a-z]{6}$`)

// foreign is the error for an entry of the published tree at repository path p.
func foreign(p, reason string) error {
	return fmt.Errorf("published tree: %s: %s: %w; remove it from the branch", safetext.Escape(p), reason, ErrForeignEntry)
}

// checkTenantsEntry refuses an entry directly under tenants/ (name, at repository path
// p) that is not a tenant folder.
func checkTenantsEntry(p, name string, mode filemode.FileMode) error {
	switch {
	case mode == filemode.Submodule:
		return foreign(p, "a submodule")
	case mode != filemode.Dir:
		return foreign(p, "not a folder")
	case !tenantDirRE.MatchString(name):
		return foreign(p, "not a capsule code (a tenant's folder is its code in lower case)")
	}
	return nil
}

// checkFileMode refuses a file of the published tree (repository path p) that is not
// a regular file: a submodule (no content to read) or a symbolic link.
func checkFileMode(p string, mode filemode.FileMode) error {
	switch mode {
	case filemode.Submodule:
		return foreign(p, "a submodule")
	case filemode.Symlink:
		return foreign(p, "a symbolic link")
	}
	return nil
}

// checkPublishedFile checks one file of a flattened published tree (rel: relative to the
// managed folder, p: in the repository): no submodules or links anywhere, and under
// tenants/ only files inside tenant folders.
func checkPublishedFile(rel, p string, mode filemode.FileMode) error {
	rest, ok := strings.CutPrefix(rel, render.TenantsDir+"/")
	if !ok {
		return checkFileMode(p, mode)
	}
	name, _, inFolder := strings.Cut(rest, "/")
	dirMode := filemode.Dir
	if !inFolder {
		dirMode = mode
	}
	if err := checkTenantsEntry(strings.TrimSuffix(p, rest)+name, name, dirMode); err != nil {
		return err
	}
	return checkFileMode(p, mode)
}

// published is the tree of a branch, read lazily under a folder prefix: planning an
// update of a few tenants reads a few tree objects, whatever the size of the fleet.
type published struct {
	view   *gitrepo.View
	prefix string
}

func (p *published) full(rel string) string { return gitrepo.Join(p.prefix, rel) }

// tenantDirs lists the tenants the branch holds, refusing anything else under tenants/
// (ErrForeignEntry): a folder whose name is not a capsule code would be listed in the
// root kustomization as written, and a file or submodule would be carried on unseen.
func (p *published) tenantDirs() (map[string]bool, error) {
	entries, err := p.view.List(p.full(render.TenantsDir))
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(entries))
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		if err := checkTenantsEntry(p.full(path.Join(render.TenantsDir, name)), name, entries[name].Mode); err != nil {
			return nil, err
		}
		out[name] = true
	}
	return out, nil
}

// checkFolders refuses a branch holding something other than a folder where Eva's
// folders go: at the publish path or above it, or at tenants/, flux/ or argocd/ below
// it. A file there would read as an empty folder and be replaced silently.
func (p *published) checkFolders() error {
	var folders []string
	for d := p.prefix; d != "" && d != "."; d = path.Dir(d) {
		folders = append(folders, d)
	}
	slices.Reverse(folders)
	for _, d := range ownedDirs() {
		folders = append(folders, p.full(d))
	}
	for _, f := range folders {
		if e, ok, err := p.view.Lookup(f); err != nil {
			return err
		} else if ok {
			if err := checkFileMode(f, e.Mode); err != nil {
				return err
			}
			return foreign(f, "not a folder")
		}
	}
	return nil
}

// tenantFiles returns the published files of one tenant, keyed by tree path relative
// to the prefix.
func (p *published) tenantFiles(dir string) (gitrepo.Files, error) {
	files, err := p.view.Files(p.full(path.Join(render.TenantsDir, dir)))
	if err != nil {
		return nil, err
	}
	out := gitrepo.Files{}
	for full, e := range files {
		if err := checkFileMode(full, e.Mode); err != nil {
			return nil, err
		}
		if p.prefix != "" {
			full = strings.TrimPrefix(full, p.prefix+"/")
		}
		out[full] = e
	}
	for _, top := range render.DeliveryDirs {
		delivery := path.Join(top, dir+".yaml")
		if e, ok, err := p.view.Lookup(p.full(delivery)); err != nil {
			return nil, err
		} else if ok {
			if err := checkFileMode(p.full(delivery), e.Mode); err != nil {
				return nil, err
			}
			out[delivery] = e
		}
	}
	return out, nil
}

// planUpdate decides what an update changes on the published tree: the tenants whose
// files differ (added or changed) and the tenants it removes. Only the tenants in the
// update are read, unless it is a full update, which needs the list of published ones.
func (p *published) planUpdate(u Update) (*Plan, error) {
	if err := p.checkFolders(); err != nil {
		return nil, err
	}
	pub, err := p.tenantDirs()
	if err != nil {
		return nil, err
	}
	plan := &Plan{Published: len(pub), Partial: !u.Full}
	dirs := make([]string, 0, len(u.Tenants))
	for d := range u.Tenants {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		files := u.Tenants[d]
		if files == nil {
			if pub[d] {
				plan.Removed = append(plan.Removed, d)
			}
			continue
		}
		if !pub[d] {
			plan.Added = append(plan.Added, d)
			continue
		}
		old, err := p.tenantFiles(d)
		if err != nil {
			return nil, err
		}
		same := len(old) == len(files)
		for _, f := range files {
			if e, ok := old[f.Path]; !ok || e.Hash != gitrepo.BlobHash(f.Data) {
				same = false
				break
			}
		}
		if !same {
			plan.Changed = append(plan.Changed, d)
		}
	}
	if u.Full {
		for d := range pub {
			if _, listed := u.Tenants[d]; !listed {
				plan.Removed = append(plan.Removed, d)
			}
		}
		slices.Sort(plan.Removed)
	}
	plan.Rendered = plan.Published + len(plan.Added) - len(plan.Removed)
	return plan, nil
}

// changes turns the effective update into tree edits on this head: each listed tenant's
// published files are replaced by its new ones (or removed), and the root kustomization
// is regenerated from the tenants the branch will hold. store writes a blob.
func (p *published) changes(eff Update, store func([]byte) (gitrepo.Entry, error)) (map[string]*gitrepo.Entry, error) {
	pub, err := p.tenantDirs()
	if err != nil {
		return nil, err
	}
	changes := map[string]*gitrepo.Entry{}
	for d, files := range eff.Tenants {
		if pub[d] {
			old, err := p.tenantFiles(d)
			if err != nil {
				return nil, err
			}
			for rel := range old {
				changes[p.full(rel)] = nil
			}
		}
		if files == nil {
			delete(pub, d)
			continue
		}
		pub[d] = true
		for _, f := range files {
			e, err := store(f.Data)
			if err != nil {
				return nil, err
			}
			changes[p.full(f.Path)] = &e
		}
	}
	codes := make([]string, 0, len(pub))
	for d := range pub {
		codes = append(codes, strings.ToUpper(d))
	}
	root := render.RootKustomizationFile(eff.deliveryDir(), codes)
	e, err := store(root.Data)
	if err != nil {
		return nil, err
	}
	changes[p.full(root.Path)] = &e
	return changes, nil
}

// checked judges a plan against the safety rules on this published tree (reading the
// bundles it would remove from repo) and returns the update reduced to the tenants the
// plan really adds, changes or removes.
func (p *published) checked(u Update, plan *Plan, s Safety, repo *git.Repository) (Update, error) {
	read := func(rel string) ([]byte, error) {
		e, ok, err := p.view.Lookup(p.full(rel))
		if err != nil {
			return nil, fmt.Errorf("reading %s from the published tree: %w", rel, err)
		}
		if !ok {
			return nil, fmt.Errorf("%s is not in the published tree", rel)
		}
		return readBlob(repo, e.Hash)
	}
	if err := plan.Check(s, read); err != nil {
		return Update{}, err
	}
	if err := checkOwners(u, plan.Changed, read); err != nil {
		return Update{}, err
	}
	eff := Update{Tenants: map[string][]render.File{}, DeliveryDir: u.DeliveryDir, Adopt: u.Adopt}
	for _, d := range append(plan.Added, plan.Changed...) {
		eff.Tenants[d] = u.Tenants[d]
	}
	for _, d := range plan.Removed {
		eff.Tenants[d] = nil
	}
	return eff, nil
}
