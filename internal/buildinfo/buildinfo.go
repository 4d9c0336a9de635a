// Package buildinfo reads what a binary knows about its own build: the module version
// it was built at (set by `go install ...@version`), the commit and the Go version.
package buildinfo

import (
	"fmt"
	"runtime/debug"
)

// Info is what `evactl version` and the operator's startup log report.
type Info struct {
	// Version is the module version, "(devel)" for a build from a checkout.
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from, when the build recorded it;
	// Modified says the checkout had uncommitted changes.
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"goVersion"`
}

// Read returns the running binary's build information.
func Read() Info {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown"}
	}
	out := Info{Version: info.Main.Version, GoVersion: info.GoVersion}
	if out.Version == "" {
		out.Version = "(devel)"
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			out.Commit = s.Value
		case "vcs.modified":
			out.Modified = s.Value == "true"
		}
	}
	return out
}

// String formats the information on one line: "v0.3.0 (commit 1d0d030, go1.26.0)".
func (i Info) String() string {
	commit := i.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	switch {
	case commit == "":
		return fmt.Sprintf("%s (%s)", i.Version, i.GoVersion)
	case i.Modified:
		return fmt.Sprintf("%s (commit %s, modified, %s)", i.Version, commit, i.GoVersion)
	}
	return fmt.Sprintf("%s (commit %s, %s)", i.Version, commit, i.GoVersion)
}
