// Package project reads a fleet repository's project file, eva.yaml: where the fleet's
// tenant files, environments, module charts and release files live, and the Eva release
// whose environments and module charts it uses where it holds none of its own. evactl
// finds the file by walking up from the working directory, as go finds go.mod.
package project

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/aidonow/eva/internal/tenantfile"
)

// FileName is the project file's name at the root of a fleet repository.
const FileName = "eva.yaml"

// APIVersion and Kind identify a project file.
const (
	APIVersion = "eva.aidonow.com/v1alpha1"
	Kind       = "Fleet"
)

// The folders a fleet uses when its project file names none: the layout of Eva's own
// repository and of what `evactl init` makes.
const (
	DefaultTenants      = "tenants"
	DefaultEnvironments = "overlays"
	DefaultCharts       = "charts"
	DefaultRollouts     = "rollouts"
)

// maxFile bounds the project file: it is a dozen lines.
const maxFile = 64 << 10

// File is the project file as written.
type File struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Eva is the Eva release the fleet uses (0.1.0): environments and module charts the
	// repository does not hold come from it, and evactl of another release refuses to
	// run. Empty for Eva's own repository, which holds them all.
	Eva string `json:"eva,omitempty"`
	// Tenants, Environments, Charts and Rollouts are folders relative to the file.
	Tenants      string `json:"tenants,omitempty"`
	Environments string `json:"environments,omitempty"`
	Charts       string `json:"charts,omitempty"`
	Rollouts     string `json:"rollouts,omitempty"`
	// Environment is the environment the commands use when --env is not given.
	Environment string `json:"environment,omitempty"`
	// Publish is where the fleet's render is published: the target of publish, and what
	// diff, validate and cells read, when no target flag is given.
	Publish *Publish `json:"publish,omitempty"`
}

// Publish is where a fleet's render is published: a git repository's branch and
// folder, or an OCI artifact.
type Publish struct {
	// Repo is the git repository's URL (https://, ssh:// or a local path), Branch its
	// branch (default main), Path the folder holding the tree (default the root).
	Repo   string `json:"repo,omitempty"`
	Branch string `json:"branch,omitempty"`
	Path   string `json:"path,omitempty"`
	// Ref is the OCI artifact, oci://HOST/REPO:TAG, instead of a repository.
	Ref string `json:"ref,omitempty"`
}

// Fleet is a loaded project file with its folders resolved.
type Fleet struct {
	// Path is the project file; Root the folder holding it.
	Path, Root string
	// Release is the Eva release the fleet uses, "" for none.
	Release string
	// Tenants, Environments, Charts and Rollouts are the fleet's folders: joined to
	// Root, and relative to the working directory when inside it (as messages name
	// them).
	Tenants, Environments, Charts, Rollouts string
	// Environment is the commands' default environment, "" for theirs (dev); Publish
	// the fleet's publish target, nil for none.
	Environment string
	Publish     *Publish
}

// Error is a project file that cannot be used: each problem at its line and column.
type Error struct{ Problems []tenantfile.Problem }

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Find returns the fleet whose project file is in dir or the nearest folder above it;
// nil when there is none.
func Find(dir string) (*Fleet, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for d := abs; ; d = filepath.Dir(d) {
		path := filepath.Join(d, FileName)
		if info, err := os.Lstat(path); err == nil {
			if !info.Mode().IsRegular() {
				return nil, fmt.Errorf("%s: not a regular file (a project file is never a link)", path)
			}
			if owner, ok := ownerOf(info); ok && owner != os.Getuid() {
				// As git refuses a repository another user owns: an eva.yaml in a shared
				// folder above the working directory (/tmp) must not choose the charts
				// and environments this user's evactl checks and publishes with.
				return nil, fmt.Errorf("%s: owned by another user (uid %d); not used as this fleet's project file", path, owner)
			}
			return Load(path)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if filepath.Dir(d) == d {
			return nil, nil
		}
	}
}

// Load reads the project file at path.
func Load(path string) (*Fleet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading project file: %w", err)
	}
	name := displayPath(path)
	if len(data) > maxFile {
		return nil, &Error{[]tenantfile.Problem{{File: name, Line: 1, Column: 1, Message: fmt.Sprintf("larger than %d bytes", maxFile)}}}
	}
	root, problems := parse(name, data)
	if len(problems) > 0 {
		return nil, &Error{problems}
	}
	var f File
	if problems := tenantfile.DecodeStrict(name, root, &f); len(problems) > 0 {
		return nil, &Error{problems}
	}
	if problems := check(name, root, &f); len(problems) > 0 {
		return nil, &Error{problems}
	}
	dir := filepath.Dir(path)
	return &Fleet{
		Path: name, Root: displayPath(dir), Release: f.Eva,
		Tenants:      folder(dir, f.Tenants, DefaultTenants),
		Environments: folder(dir, f.Environments, DefaultEnvironments),
		Charts:       folder(dir, f.Charts, DefaultCharts),
		Rollouts:     folder(dir, f.Rollouts, DefaultRollouts),
		Environment:  f.Environment, Publish: f.Publish,
	}, nil
}

// parse reads data as one YAML mapping.
func parse(name string, data []byte) (*yaml.Node, []tenantfile.Problem) {
	doc, problems := tenantfile.ParseDocument(name, data, "a project file holds one Fleet")
	if len(problems) > 0 {
		return nil, problems
	}
	return doc.Content[0], nil
}

var releaseRE = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// check refuses what decodes but cannot be used: another kind, a release that is not
// a version, and a folder that leads out of the repository.
func check(name string, root *yaml.Node, f *File) []tenantfile.Problem {
	var problems []tenantfile.Problem
	add := func(field, msg string) {
		line, col := tenantfile.Locate(root, field)
		problems = append(problems, tenantfile.Problem{File: name, Line: line, Column: col, Field: field, Message: msg})
	}
	if f.APIVersion != APIVersion {
		add("apiVersion", fmt.Sprintf("must be %s", APIVersion))
	}
	if f.Kind != Kind {
		add("kind", fmt.Sprintf("must be %s", Kind))
	}
	if f.Eva != "" && !releaseRE.MatchString(f.Eva) {
		add("eva", fmt.Sprintf("%q is not an Eva release version (like 0.1.0)", f.Eva))
	}
	for field, dir := range map[string]string{"tenants": f.Tenants, "environments": f.Environments, "charts": f.Charts, "rollouts": f.Rollouts} {
		if dir != "" && !filepath.IsLocal(dir) {
			add(field, fmt.Sprintf("%q must be a folder inside the repository (relative, without ..)", dir))
		}
	}
	if f.Environment != "" && !environmentRE.MatchString(f.Environment) {
		add("environment", fmt.Sprintf("%q is not an environment name (lower-case letters, digits and '-')", f.Environment))
	}
	if p := f.Publish; p != nil {
		switch {
		case (p.Repo == "") == (p.Ref == ""):
			add("publish", "names a git repository (repo) or an OCI artifact (ref), one of them")
		case p.Ref != "" && !strings.HasPrefix(p.Ref, "oci://"):
			add("publish.ref", fmt.Sprintf("%q is not an oci://HOST/REPO:TAG reference", p.Ref))
		case p.Ref != "" && (p.Branch != "" || p.Path != ""):
			add("publish", "branch and path are a git repository's: an OCI artifact (ref) has none")
		case p.Path != "" && !filepath.IsLocal(p.Path):
			add("publish.path", fmt.Sprintf("%q must be a folder inside the repository (relative, without ..)", p.Path))
		}
	}
	tenantfile.SortProblems(problems)
	return problems
}

var environmentRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// folder joins a folder of the project file (or its default) to the file's folder.
func folder(dir, name, def string) string {
	if name == "" {
		name = def
	}
	return displayPath(filepath.Join(dir, name))
}

// displayPath is path relative to the working directory when it is inside it (the
// form messages name files in), absolute otherwise.
func displayPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	wd, err := os.Getwd()
	if err != nil {
		return abs
	}
	if rel, err := filepath.Rel(wd, abs); err == nil && (rel == "." || filepath.IsLocal(rel)) {
		return rel
	}
	return abs
}
