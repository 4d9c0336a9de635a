package chartrepo

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/yaml"
)

// LockFile is the name of the published-versions list inside the charts folder.
const LockFile = "published.yaml"

// lockHeader explains the file to whoever opens it.
const lockHeader = `# Every module chart version published, by digest. Written by ` + "`evactl charts push`" + ` (and, for
# Eva's own charts, by make manifests, as its release pushes them); do not edit. Tenant
# pins and the catalog's versions must be listed here, and chart verification renders
# exactly the archive of the digest given.
`

// Published is one published chart version.
type Published struct {
	Version string `json:"version"`
	// Digest is the OCI manifest's digest: what a mirror copies and verifies.
	Digest string `json:"digest"`
	// Archive is the chart archive's (the manifest's one layer) digest: what
	// source-controller stores and helm-controller installs.
	Archive string `json:"archive"`
}

// Lock lists the published versions of each chart.
type Lock struct {
	Charts map[string][]Published `json:"charts"`
}

var digestRE = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

// ReadLock reads a lock file. A missing file is reported with os.ErrNotExist.
func ReadLock(path string) (*Lock, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseLock(path, data)
}

// ParseLock reads the lock file named file (for errors) from its content.
func ParseLock(file string, data []byte) (*Lock, error) {
	var l Lock
	if err := yaml.UnmarshalStrict(data, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := l.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &l, nil
}

// ReadLockIfPresent is ReadLock returning nil, nil when the file does not exist.
func ReadLockIfPresent(path string) (*Lock, error) {
	l, err := ReadLock(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return l, err
}

func (l *Lock) check() error {
	for name, versions := range l.Charts {
		seen := map[string]bool{}
		for i, p := range versions {
			at := fmt.Sprintf("charts[%s][%d]", name, i)
			if _, err := semver.StrictNewVersion(NormalVersion(p.Version)); err != nil {
				return fmt.Errorf("%s.version: %q: %v", at, p.Version, err)
			}
			if !digestRE.MatchString(p.Digest) || !digestRE.MatchString(p.Archive) {
				return fmt.Errorf("%s: digest and archive must be sha256:<64 hex>", at)
			}
			if seen[NormalVersion(p.Version)] {
				return fmt.Errorf("%s: version %s listed twice", at, p.Version)
			}
			seen[NormalVersion(p.Version)] = true
		}
	}
	return nil
}

// Find returns the published entry of a chart version.
func (l *Lock) Find(chart, version string) (Published, bool) {
	for _, p := range l.Charts[chart] {
		if NormalVersion(p.Version) == NormalVersion(version) {
			return p, true
		}
	}
	return Published{}, false
}

// Digest returns the OCI manifest digest of a published chart version (a nil lock
// has none): what each tenant's chart source pins.
func (l *Lock) Digest(chart, version string) (string, bool) {
	if l == nil {
		return "", false
	}
	p, ok := l.Find(chart, version)
	return p.Digest, ok
}

// Versions lists a chart's published versions, oldest first.
func (l *Lock) Versions(chart string) []string {
	var out []string
	for _, p := range l.Charts[chart] {
		out = append(out, p.Version)
	}
	return out
}

// Conflict says why an archive cannot be published as its version: the version was
// published before with other content. Published versions are immutable, as Helm
// repositories and Flux expect (a cached chart of that version would never change).
func (l *Lock) Conflict(a *Archive) error {
	if l == nil {
		return nil
	}
	p, ok := l.Find(a.Name, a.Version)
	if !ok || p.Archive == a.Digest {
		return nil
	}
	return fmt.Errorf("%s %s was published as %s, but %s now packages to %s: published versions are immutable, raise the version in its Chart.yaml",
		a.Name, a.Version, p.Archive, a.Dir, a.Digest)
}

// Add records a published version (replacing nothing: Conflict must be checked first).
func (l *Lock) Add(name string, p Published) {
	if l.Charts == nil {
		l.Charts = map[string][]Published{}
	}
	if _, ok := l.Find(name, p.Version); ok {
		return
	}
	versions := append(l.Charts[name], p)
	sort.SliceStable(versions, func(i, j int) bool { return lessVersion(versions[i].Version, versions[j].Version) })
	l.Charts[name] = versions
}

// Write writes the lock file, sorted, with its header.
func (l *Lock) Write(path string) error {
	data, err := yaml.Marshal(l)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append([]byte(lockHeader), data...), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Names lists the charts of the lock, sorted.
func (l *Lock) Names() []string {
	names := make([]string, 0, len(l.Charts))
	for n := range l.Charts {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func lessVersion(a, b string) bool {
	va, errA := semver.NewVersion(a)
	vb, errB := semver.NewVersion(b)
	if errA != nil || errB != nil {
		return strings.Compare(a, b) < 0
	}
	return va.LessThan(vb)
}
