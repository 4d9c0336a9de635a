package tenantfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/tenant"
)

// Result is what loading a set of tenant files found.
type Result struct {
	// Files is the number of tenant files read.
	Files int `json:"files"`
	// Tenants holds every file that decoded, valid or not, in path order.
	Tenants []*Tenant `json:"-"`
	// Secrets holds every tenant's encrypted Secret files that passed their checks, in
	// path order; each is also one of its tenant's spec.secrets.
	Secrets []*SecretFile `json:"-"`
	// Problems lists everything wrong, sorted by file and position.
	Problems []Problem `json:"problems"`
}

// Valid reports whether no problem was found.
func (r *Result) Valid() bool { return len(r.Problems) == 0 }

// UsageError is an error in what was asked (a path that does not exist), as opposed to
// a problem in a tenant file.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Load reads the tenant files named by paths (files, or folders searched recursively
// for *.yaml and *.yml, skipping hidden entries), validates each against the catalog,
// and checks the set as a whole: capsule codes and object names are unique, and each
// file is named after its capsule code. Files ending in .sops.yaml are the tenants'
// encrypted Secrets (ParseSecret); each must belong to a tenant read with it, and
// every Secret a tenant's secretMounts names must be one of them. A folder holding no tenant file is a problem,
// since publishing an empty set would delete every tenant downstream.
func Load(paths []string, catalog *tenant.Catalog) (*Result, error) {
	return LoadWith(paths, catalog, LoadOptions{})
}

// LoadWith is Load with options: files a previous valid load already decoded (by a
// render cache) are not decoded again. The tenant files are read and decoded on every
// core; the result is the same as a sequential load's.
func LoadWith(paths []string, catalog *tenant.Catalog, opts LoadOptions) (*Result, error) {
	files, res, err := collect(paths)
	if err != nil {
		return nil, err
	}
	type loaded struct {
		data     []byte
		info     os.FileInfo
		refusal  string
		tenant   *Tenant
		problems []Problem
		secret   *SecretFile
	}
	out := make([]loaded, len(files))
	opts.withSecrets = codesWithSecrets(files)
	eachIndex(len(files), func(i int) {
		f, l := files[i], &out[i]
		if !IsSecretFile(f.path) {
			if t := opts.reuse(f.path); t != nil {
				l.tenant = t
				return
			}
		}
		l.data, l.info, l.refusal = readTenantFile(f.path, f.folder)
		switch {
		case l.refusal != "":
		case IsSecretFile(f.path):
			l.secret, l.problems = ParseSecret(f.path, l.data)
		default:
			l.tenant, l.problems = Parse(f.path, l.data, catalog)
			if l.tenant != nil {
				k := knownOf(l.info)
				l.tenant.known = &k
			}
		}
	})
	for i, f := range files {
		l := out[i]
		if l.refusal != "" {
			res.Problems = append(res.Problems, Problem{File: f.path, Line: 1, Column: 1, Message: l.refusal}.clean())
			continue
		}
		res.Problems = append(res.Problems, l.problems...)
		if IsSecretFile(f.path) {
			if l.secret != nil {
				res.Secrets = append(res.Secrets, l.secret)
			}
			continue
		}
		res.Files++
		if l.tenant != nil {
			res.Tenants = append(res.Tenants, l.tenant)
		}
	}
	var checks []Problem
	if !res.AllReused() {
		// Stubs alone all come from one earlier valid load (LoadOptions.Previous): their
		// codes and names were unique then, and still are among any of them.
		checks = crossFileProblems(res.Tenants)
	}
	for _, p := range append(checks, attachSecrets(res.Tenants, res.Secrets)...) {
		res.Problems = append(res.Problems, p.clean())
	}
	SortProblems(res.Problems)
	return res, nil
}

// AllReused reports whether every tenant is a stub of an earlier load (Tenant.Reused):
// no tenant file was read.
func (r *Result) AllReused() bool {
	for _, t := range r.Tenants {
		if !t.Reused {
			return false
		}
	}
	return true
}

// eachIndex calls fn for 0..n-1 on every core.
func eachIndex(n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(n, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// tenantPath is a tenant file to read and the folder it must stay in: the folder
// searched, or the parent of a file named directly.
type tenantPath struct{ path, folder string }

// collect expands paths into a sorted, de-duplicated list of tenant files.
func collect(paths []string) ([]tenantPath, *Result, error) {
	res := &Result{}
	// One path (a folder, or a file and its Secrets) names no file twice; only several
	// can.
	var seen map[string]bool
	if len(paths) > 1 {
		seen = map[string]bool{}
	}
	var files []tenantPath
	var folder string
	add := func(f string) {
		if seen != nil {
			clean := filepath.Clean(f)
			if seen[clean] {
				return
			}
			seen[clean] = true
		}
		files = append(files, tenantPath{path: f, folder: folder})
	}
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, nil, &UsageError{Err: fmt.Errorf("%s: %w", p, errors.Unwrap(err))}
		}
		if !info.IsDir() {
			folder = filepath.Dir(p)
			add(p)
			// A tenant file named on its own brings its encrypted Secrets with it.
			if base := filepath.Base(p); !IsSecretFile(p) && isYAML(p) {
				code := strings.TrimSuffix(base, filepath.Ext(base))
				if capsuleCodeValid(code) {
					siblings, _ := filepath.Glob(filepath.Join(folder, code+".*"+SecretFileSuffix))
					for _, s := range siblings {
						add(s)
					}
				}
			}
			continue
		}
		folder = p
		before := len(files)
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if path != p && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.IsDir() && isYAML(path) {
				add(path)
			}
			return nil
		})
		if err != nil {
			return nil, nil, &UsageError{Err: fmt.Errorf("reading folder %s: %w", p, err)}
		}
		if len(files) == before {
			res.Problems = append(res.Problems, Problem{File: p, Line: 1, Column: 1,
				Message: "no tenant files (*.yaml) found in this folder"})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	return files, res, nil
}

func isYAML(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	return ext == ".yaml" || ext == ".yml"
}

// crossFileProblems checks unique capsule codes, unique object names, and file names.
func crossFileProblems(tenants []*Tenant) []Problem {
	var problems []Problem
	byCode := make(map[string][]*Tenant, len(tenants))
	byName := make(map[string][]*Tenant, len(tenants))
	for _, t := range tenants {
		code := t.Object.Spec.CapsuleCode
		if capsuleCodeValid(code) {
			byCode[code] = append(byCode[code], t)
			if want := code + ".yaml"; filepath.Base(t.File) != want {
				line, col := t.Position("spec.capsuleCode")
				problems = append(problems, Problem{File: t.File, Line: max(line, 1), Column: max(col, 1), Field: "spec.capsuleCode",
					Message: fmt.Sprintf("file name must be %s (the capsule code), not %s", want, filepath.Base(t.File))})
			}
		}
		if t.Object.Name != "" {
			key := t.Object.Namespace + "/" + t.Object.Name
			byName[key] = append(byName[key], t)
		}
	}
	dup := func(group map[string][]*Tenant, path, what string) {
		for key, ts := range group {
			if len(ts) < 2 {
				continue
			}
			for _, t := range ts {
				var others []string
				for _, o := range ts {
					if o != t {
						others = append(others, o.File)
					}
				}
				line, col := t.Position(path)
				problems = append(problems, Problem{File: t.File, Line: max(line, 1), Column: max(col, 1), Field: path,
					Message: fmt.Sprintf("%s %s is also used by %s", what, strings.TrimPrefix(key, "/"), strings.Join(others, ", "))})
			}
		}
	}
	dup(byCode, "spec.capsuleCode", "capsule code")
	dup(byName, "metadata.name", "object name")
	return problems
}

var capsuleCodeRE = regexp.MustCompile(evav1.CapsuleCodePattern)

func capsuleCodeValid(code string) bool { return capsuleCodeRE.MatchString(code) }

// StdinName is what problems call a tenant read from standard input.
const StdinName = "<stdin>"

// LoadReader reads one tenant file from r (standard input: `evactl validate -`), named
// StdinName in problems, and checks it as Load checks a file named on its own, but for
// its name (there is none to match its capsule code) and its encrypted Secrets (none
// can come with it). More than MaxFileBytes is refused.
func LoadReader(r io.Reader, catalog *tenant.Catalog) (*Result, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, &UsageError{Err: fmt.Errorf("reading standard input: %w", err)}
	}
	res := &Result{Files: 1}
	if len(data) > MaxFileBytes {
		res.Problems = append(res.Problems, Problem{File: StdinName, Line: 1, Column: 1,
			Message: fmt.Sprintf("more than %d bytes: larger than a tenant file may be", MaxFileBytes)})
		return res, nil
	}
	t, problems := Parse(StdinName, data, catalog)
	res.Problems = append(res.Problems, problems...)
	if t != nil {
		res.Tenants = append(res.Tenants, t)
		for _, p := range attachSecrets(res.Tenants, nil) {
			res.Problems = append(res.Problems, p.clean())
		}
	}
	SortProblems(res.Problems)
	return res, nil
}
