package overlay

import (
	"fmt"
	"path/filepath"

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
		if !filepath.IsLocal(c.Path) || paths[filepath.Clean(c.Path)] {
			return fmt.Errorf("%s.path: %q must be a folder of the published tree, relative, its own", at, c.Path)
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
