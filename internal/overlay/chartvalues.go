package overlay

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ChartValues are the values of the operator's chart (deploy/charts/eva-operator) that
// install it with this environment: its name (env) and the files it was loaded from
// (environmentFiles), which the chart mounts into the operator and derives the fences'
// parameters from (FenceConfigMap). With them the operator renders, and the cluster
// enforces, exactly what evactl renders for the fleet: one environment, read by both
// sides. The chart mounts one flat folder, so an environment whose patches live in a
// subfolder is refused.
func (e *Environment) ChartValues() (map[string]any, error) {
	if len(e.Files) == 0 {
		return nil, fmt.Errorf("environment %s: not loaded from files", e.Name)
	}
	files := map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(e.Files)) {
		if strings.Contains(name, "/") {
			return nil, fmt.Errorf("environment %s: %s: the operator's chart mounts the environment as one folder (a ConfigMap): keep its patch files beside %s, not in a subfolder", e.Name, name, SettingsFile)
		}
		files[name] = string(e.Files[name])
	}
	return map[string]any{"env": e.Name, "environmentFiles": files}, nil
}
