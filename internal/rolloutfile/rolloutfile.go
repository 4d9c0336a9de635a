// Package rolloutfile reads and writes platform releases kept as files, for teams that
// publish with evactl and no operator: each file under rollouts/ is one EvaRollout as
// a release manager wrote it, and its status is the progress `evactl rollout promote`
// recorded, one reviewed commit per step. The renderer gives each tenant the versions
// of the releases whose status admitted it, exactly as the operator does with the
// EvaRollout objects of a cluster.
package rolloutfile

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/fileguard"
	"github.com/aidonow/eva/internal/safetext"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/tenantfile"
)

// DefaultDir is where the release files live, beside tenants/.
const DefaultDir = "rollouts"

// maxFileBytes bounds one release file; a release is a few hundred lines at most.
const maxFileBytes = 1 << 20

// File is one release file.
type File struct {
	// Path is the file as given (relative to where evactl runs, or absolute).
	Path string
	// Rollout is the release, with the progress recorded so far.
	Rollout *evav1.EvaRollout
	// doc is the parsed document and raw its text, which Save edits.
	doc *yaml.Node
	raw []byte
}

var (
	semverRE  = regexp.MustCompile(evav1.SemverPattern)
	moduleRE  = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	percentRE = regexp.MustCompile(`^([1-9][0-9]?|100)%$`)
)

// Load reads every release file (*.yaml, *.yml) of dir, not recursively. A dir that
// does not exist holds no release. Each problem names the file, the line and the field;
// a release with problems is not returned.
func Load(dir string, catalog *tenant.Catalog) ([]*File, []tenantfile.Problem, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the release folder %s: %w", dir, err)
	}
	var files []*File
	var problems []tenantfile.Problem
	byName := map[string]string{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || (!strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml")) {
			continue
		}
		path := filepath.Join(dir, name)
		if !e.Type().IsRegular() {
			problems = append(problems, tenantfile.Problem{File: path, Line: 1, Column: 1, Message: "not a regular file (a symbolic link or device is not read)"})
			continue
		}
		f, ps := parseFile(path, catalog)
		problems = append(problems, ps...)
		if f == nil {
			continue
		}
		key := f.Rollout.Namespace + "/" + f.Rollout.Name
		if other, dup := byName[key]; dup {
			problems = append(problems, f.Problem("metadata.name", fmt.Sprintf("EvaRollout %s is also defined in %s", key, other)))
			continue
		}
		byName[key] = path
		files = append(files, f)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for i := range problems {
		problems[i] = clean(problems[i])
	}
	return files, problems, nil
}

// maxField bounds a field path in a problem; key names come from the file.
const maxField = 256

// clean makes a problem safe to print in every output format: a release file's key
// names, values and file name are text anyone who can open a pull request wrote, and a
// newline in them would start a CI workflow command of its own, an ESC repaint the
// terminal. Escaping is idempotent, so cleaning twice changes nothing.
func clean(p tenantfile.Problem) tenantfile.Problem {
	p.File = safetext.Escape(p.File)
	p.Field = safetext.Limit(p.Field, maxField)
	p.Message = safetext.Limit(p.Message, safetext.MaxMessage)
	return p
}

// Rollouts returns the releases of the files.
func Rollouts(files []*File) []evav1.EvaRollout {
	out := make([]evav1.EvaRollout, len(files))
	for i, f := range files {
		out[i] = *f.Rollout
	}
	return out
}

func parseFile(path string, catalog *tenant.Catalog) (*File, []tenantfile.Problem) {
	fail := func(line int, msg string) []tenantfile.Problem {
		return []tenantfile.Problem{{File: path, Line: line, Column: 1, Message: msg}}
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fail(1, err.Error())
	}
	if info.Size() > maxFileBytes {
		return nil, fail(1, fmt.Sprintf("%d bytes, more than a release file may hold (%d)", info.Size(), maxFileBytes))
	}
	if why := fileguard.SoleLink(info); why != "" {
		return nil, fail(1, why+": release files must be plain files of their own (another name may be outside the folder)")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fail(1, err.Error())
	}
	doc, ps := tenantfile.ParseDocument(path, data, "a release file holds one EvaRollout")
	if len(ps) > 0 {
		return nil, ps
	}
	f := &File{Path: path, doc: doc, raw: data, Rollout: &evav1.EvaRollout{}}
	if ps := tenantfile.DecodeStrict(path, doc.Content[0], f.Rollout); len(ps) > 0 {
		return nil, ps
	}
	if ps := f.validate(catalog); len(ps) > 0 {
		return nil, ps
	}
	return f, nil
}

// validate holds a release file to what the API server holds an EvaRollout to (the
// CRD's schema and rules), and to the catalog: every module it names exists.
func (f *File) validate(catalog *tenant.Catalog) []tenantfile.Problem {
	r := f.Rollout
	var ps []tenantfile.Problem
	add := func(field, format string, args ...any) {
		ps = append(ps, f.Problem(field, fmt.Sprintf(format, args...)))
	}
	if r.APIVersion != evav1.GroupVersion.String() || r.Kind != "EvaRollout" {
		add("kind", "apiVersion %q, kind %q: want %s, EvaRollout", r.APIVersion, r.Kind, evav1.GroupVersion)
	}
	if msgs := validation.IsDNS1123Subdomain(r.Name); len(msgs) > 0 {
		add("metadata.name", "%q: %s", r.Name, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Label(r.Namespace); len(msgs) > 0 {
		add("metadata.namespace", "%q: the namespace of the tenants it releases to is required: %s", r.Namespace, strings.Join(msgs, "; "))
	}
	if len(r.Spec.Versions) == 0 || len(r.Spec.Versions) > 16 {
		add("spec.versions", "%d module(s): a release names 1 to 16", len(r.Spec.Versions))
	}
	for _, m := range slices.Sorted(maps.Keys(r.Spec.Versions)) {
		v := string(r.Spec.Versions[m])
		switch {
		case !moduleRE.MatchString(m):
			add("spec.versions."+m, "%q is not a module name", m)
		case catalog.Modules[m].Chart == "":
			add("spec.versions."+m, "no module %q in the catalog (modules: %s)", m, strings.Join(slices.Sorted(maps.Keys(catalog.Modules)), ", "))
		case !semverRE.MatchString(v) || len(v) > 64:
			add("spec.versions."+m, "%q is not an exact semantic version", v)
		}
	}
	if len(r.Spec.Waves) == 0 || len(r.Spec.Waves) > 3 {
		add("spec.waves", "%d wave(s): a release has 1 to 3", len(r.Spec.Waves))
	}
	seen := map[int32]bool{}
	for i, w := range r.Spec.Waves {
		field := fmt.Sprintf("spec.waves[%d]", i)
		switch {
		case w.Wave < 1 || w.Wave > 3:
			add(field+".wave", "%d: waves are 1 (internal), 2 (pilot) and 3 (fleet)", w.Wave)
		case seen[w.Wave]:
			add(field+".wave", "wave %d is listed twice", w.Wave)
		}
		seen[w.Wave] = true
		if mu := w.MaxUpdate; mu != nil {
			if (mu.Type == intstr.Int && mu.IntVal < 1) || (mu.Type == intstr.String && !percentRE.MatchString(mu.StrVal)) {
				add(field+".maxUpdate", "%q: a count of at least 1 or a percentage from 1%% to 100%%", mu.String())
			}
		}
		if w.BakeTime.Duration < 0 {
			add(field+".bakeTime", "%s: negative", w.BakeTime.Duration)
		}
		if len(w.Frozen) > 256 {
			add(field+".frozen", "%d characters, at most 256", len(w.Frozen))
		}
	}
	if g := r.Spec.Gates.ReadyTimeout; g != nil && g.Duration <= 0 {
		add("spec.gates.readyTimeout", "%s: must be positive", g.Duration)
	}
	return ps
}

// Problem is a problem of the file at a field (dotted, with [i] for list items), at
// the line that holds it, or the nearest enclosing one that exists; its text is escaped
// and bounded.
func (f *File) Problem(field, message string) tenantfile.Problem {
	line, col := 1, 1
	if f.doc != nil && len(f.doc.Content) == 1 {
		n := f.doc.Content[0]
		line, col = n.Line, n.Column
		for _, part := range splitField(field) {
			next := child(n, part)
			if next == nil {
				break
			}
			n = next
			line, col = n.Line, n.Column
		}
	}
	return clean(tenantfile.Problem{File: f.Path, Line: line, Column: col, Field: field, Message: message})
}

func splitField(field string) []string {
	var parts []string
	for _, p := range strings.Split(field, ".") {
		if p == "" {
			continue
		}
		if i := strings.Index(p, "["); i > 0 {
			parts = append(parts, p[:i], p[i:])
			continue
		}
		parts = append(parts, p)
	}
	return parts
}

func child(n *yaml.Node, part string) *yaml.Node {
	if strings.HasPrefix(part, "[") {
		var i int
		if _, err := fmt.Sscanf(part, "[%d]", &i); err != nil || n.Kind != yaml.SequenceNode || i >= len(n.Content) {
			return nil
		}
		return n.Content[i]
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == part {
			return n.Content[i+1]
		}
	}
	return nil
}
