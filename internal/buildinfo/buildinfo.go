// Package buildinfo reads what a binary knows about its own build: the module version
// it was built at (set by `go install ...@version`), the commit and the Go version.
package buildinfo

import (
	"fmt"
	"regexp"
	"runtime/debug"
	"strings"
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

// version is the release version a release build stamps (-ldflags -X
// github.com/aidonow/eva/internal/buildinfo.version=v0.2.0): a build from a checkout at
// a release tag is not otherwise known to be one.
var version string

// Read returns the running binary's build information.
func Read() Info {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown"}
	}
	out := Info{Version: info.Main.Version, GoVersion: info.GoVersion}
	if version != "" {
		out.Version = version
	}
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

// releaseRE matches a release version: v1.2.3, or v1.2.3-rc.1, but not a
// pseudo-version Go stamps on a build between releases, nor a dirty checkout's.
var releaseRE = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$`)

// pseudoRE matches a pseudo-version's timestamp and revision.
var pseudoRE = regexp.MustCompile(`[0-9]{14}-[0-9a-f]{12}$`)

// Release is the release this binary is, without the leading v ("0.2.0"); "" for a
// development build.
func (i Info) Release() string {
	if !releaseRE.MatchString(i.Version) || pseudoRE.MatchString(i.Version) {
		return ""
	}
	return strings.TrimPrefix(i.Version, "v")
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
