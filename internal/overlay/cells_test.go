package overlay

import (
	"strings"
	"testing"
)

// TestCellsSettings reads an environment's cells and refuses cells that could not be
// told apart or could hold nothing.
func TestCellsSettings(t *testing.T) {
	base := "domain: a.example\nseedImage: s:1\nchartSource: {name: charts}\ngitopsSource: {name: gitops}\n"
	good := base + "cells:\n  - name: eu-1\n    labels: {region: eu}\n    path: cells/eu-1\n    capacity: {cpu: \"64\", memory: 256Gi, pods: 2000, tenants: 100, overcommit: 1.5}\n"
	s, err := ParseSettings([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	c := s.PlacementCells()
	if len(c) != 1 || c[0].Name != "eu-1" || c[0].Labels["region"] != "eu" || c[0].Capacity.Memory.String() != "256Gi" || c[0].Capacity.Overcommit != 1.5 || s.Cells[0].Path != "cells/eu-1" {
		t.Fatalf("cells: %+v", s.Cells)
	}
	for body, want := range map[string]string{
		"cells:\n  - {name: a, path: x, capacity: {cpu: \"1\", memory: 1Gi}}\n  - {name: a, path: y, capacity: {cpu: \"1\", memory: 1Gi}}\n":   `cells[1].name: "a" names two cells`,
		"cells:\n  - {name: a, path: x, capacity: {cpu: \"1\", memory: 1Gi}}\n  - {name: b, path: x, capacity: {cpu: \"1\", memory: 1Gi}}\n":   `cells[1].path: "x"`,
		"cells:\n  - {name: a, path: ../x, capacity: {cpu: \"1\", memory: 1Gi}}\n":                                                             `cells[0].path: "../x"`,
		"cells:\n  - {name: a, path: cells/EU, capacity: {cpu: \"1\", memory: 1Gi}}\n":                                                         `cells[0].path: "cells/EU"`,
		"cells:\n  - {name: a, path: x, capacity: {cpu: \"1\", memory: 1Gi}}\n  - {name: b, path: x/y, capacity: {cpu: \"1\", memory: 1Gi}}\n": `cells[1].path: "x/y" and "x": one cell's folder is inside another's`,
		"cells:\n  - {name: a, path: x, capacity: {cpu: \"1\"}}\n":                                                                             "cells[0].capacity: cpu and memory must be more than zero",
		"cells:\n  - {name: EU, path: x, capacity: {cpu: \"1\", memory: 1Gi}}\n":                                                               `cells[0].name: "EU"`,
		"cells:\n  - {name: a, path: x, capacity: {cpu: \"1\", memory: 1Gi, cores: 2}}\n":                                                      `unknown field "cores"`,
	} {
		if _, err := ParseSettings([]byte(base + body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}
