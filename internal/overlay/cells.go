package overlay

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/aidonow/eva/internal/placement"
)

// Cell is one cluster of an environment that tenants are placed on (docs/cells.md):
// its name, labels and capacity, and the folder of the published tree its Flux applies.
type Cell struct {
	placement.Cell `json:",inline"`
	// Path is the cell's folder of the published tree.
	Path string `json:"path"`
}

// PlacementCells are the cells as placement reads them.
func (s *Settings) PlacementCells() []placement.Cell {
	out := make([]placement.Cell, len(s.Cells))
	for i, c := range s.Cells {
		out[i] = c.Cell
	}
	return out
}

// checkCells refuses cells that could not be told apart or could hold nothing.
func (s *Settings) checkCells() error {
	names, paths := map[string]bool{}, map[string]bool{}
	for i, c := range s.Cells {
		at := fmt.Sprintf("cells[%d]", i)
		if msgs := validation.IsDNS1123Label(c.Name); len(msgs) > 0 {
			return fmt.Errorf("%s.name: %q: %s", at, c.Name, msgs[0])
		}
		if names[c.Name] {
			return fmt.Errorf("%s.name: %q names two cells", at, c.Name)
		}
		names[c.Name] = true
		if !filepath.IsLocal(c.Path) || paths[filepath.Clean(c.Path)] || !validCellPath(c.Path) {
			return fmt.Errorf("%s.path: %q must be a folder of the published tree, relative, its own, of lower-case letters, digits, '.', '_' and '-' between slashes (it also names the cell's OCI repository)", at, c.Path)
		}
		for other := range paths {
			if nested(other, filepath.Clean(c.Path)) {
				return fmt.Errorf("%s.path: %q and %q: one cell's folder is inside another's", at, c.Path, other)
			}
		}
		paths[filepath.Clean(c.Path)] = true
		if c.Capacity.CPU.Sign() <= 0 || c.Capacity.Memory.Sign() <= 0 {
			return fmt.Errorf("%s.capacity: cpu and memory must be more than zero", at)
		}
		if c.Capacity.Pods < 0 || c.Capacity.Tenants < 0 || c.Capacity.Overcommit < 0 {
			return fmt.Errorf("%s.capacity: pods, tenants and overcommit must not be negative", at)
		}
		for k, v := range c.Labels {
			if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
				return fmt.Errorf("%s.labels: %q: %s", at, k, msgs[0])
			}
			if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
				return fmt.Errorf("%s.labels[%s]: %q: %s", at, k, v, msgs[0])
			}
		}
	}
	return nil
}

// cellPathSegment is one folder name of a cell's path: valid in a git tree and in an
// OCI repository name.
var cellPathSegment = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*$`)

// validCellPath says whether every folder of the slash-separated path p is a
// cellPathSegment.
func validCellPath(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if !cellPathSegment.MatchString(seg) {
			return false
		}
	}
	return true
}

// nested says whether one of the folders a and b is inside the other.
func nested(a, b string) bool {
	return strings.HasPrefix(a+string(filepath.Separator), b+string(filepath.Separator)) ||
		strings.HasPrefix(b+string(filepath.Separator), a+string(filepath.Separator))
}
