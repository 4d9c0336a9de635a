package publish

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxRepoPathBytes bounds a folder path inside a repository.
const MaxRepoPathBytes = 1024

// ErrRepoPath is wrapped by every error of RepoPath.
var ErrRepoPath = errors.New("not a folder inside the repository")

// RepoPath checks a folder path naming a place inside a repository or a published tree
// (publish git --path, the operator's git path) and returns it in canonical form: ""
// for the root, otherwise slash-separated segments with no trailing slash.
//
// It refuses, rather than cleans, anything that could leave the tree or land where git
// will not check it out: absolute paths, ".." segments (a/../../b), ".git" components
// in any case (.git/hooks would be executed by whoever clones), empty and "."
// segments, backslashes (a separator on Windows checkouts), control and other
// non-printable characters, and invalid UTF-8. Cleaning silently ("../escape" →
// "escape") would publish somewhere the user did not ask for; refusing names the
// mistake. One trailing slash is accepted, as shells complete folders with one.
func RepoPath(p string) (string, error) {
	fail := func(reason string) (string, error) {
		return "", fmt.Errorf("path %s: %w: %s", quotePath(p), ErrRepoPath, reason)
	}
	switch {
	case p == "":
		return "", nil
	case len(p) > MaxRepoPathBytes:
		return fail(fmt.Sprintf("longer than %d bytes", MaxRepoPathBytes))
	case !utf8.ValidString(p):
		return fail("not valid UTF-8")
	case strings.HasPrefix(p, "/"):
		return fail("absolute paths are refused; give a folder relative to the repository root")
	case strings.ContainsRune(p, '\\'):
		return fail(`backslashes are refused; separate folders with "/"`)
	}
	for _, r := range p {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) && r != ' ' {
			return fail("control and non-printable characters are refused")
		}
	}
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	for _, seg := range strings.Split(p, "/") {
		switch {
		case seg == "":
			return fail("empty segment (\"//\" or a lone \"/\")")
		case seg == ".":
			return fail(`"." segments are refused; leave --path out for the root`)
		case seg == "..":
			return fail(`".." segments would leave the repository`)
		case isGitDir(seg):
			return fail("a .git component would write into git's own folder")
		}
	}
	return p, nil
}

// isGitDir reports whether a segment names git's folder on some file system: ".git"
// in any case, with trailing dots or spaces (Windows drops them), or its 8.3 short
// name "git~1".
func isGitDir(seg string) bool {
	s := strings.ToLower(strings.TrimRight(seg, ". "))
	return s == ".git" || s == "git~1"
}

// quotePath quotes a path for a message, shortened so a hostile flag cannot flood it.
func quotePath(p string) string {
	const keep = 64
	if len(p) <= keep {
		return strconv.QuoteToASCII(p)
	}
	cut := keep
	for cut > 0 && !utf8.RuneStart(p[cut]) {
		cut--
	}
	return strconv.QuoteToASCII(p[:cut]) + fmt.Sprintf("… (%d bytes)", len(p))
}

// checkFilePath refuses a rendered file path that RepoPath would refuse (or the root),
// so no sink ever writes outside its folder whatever a renderer produces.
func checkFilePath(p string) error {
	clean, err := RepoPath(p)
	if err != nil {
		return fmt.Errorf("rendered file: %w", err)
	}
	if clean != p || clean == "" {
		return fmt.Errorf("rendered file path %s: %w: not in canonical form", quotePath(p), ErrRepoPath)
	}
	return nil
}

// CellRef is the artifact reference of one cell's tree in an environment with cells:
// the cell's path appended to ref's repository, with ref's tag
// (oci://HOST/eva/tenants:prod and cells/eu-1 give oci://HOST/eva/tenants/cells/eu-1:prod).
// An oci:// prefix is kept as given.
func CellRef(ref, cellPath string) string {
	scheme := ""
	if strings.HasPrefix(ref, "oci://") {
		scheme, ref = "oci://", strings.TrimPrefix(ref, "oci://")
	}
	repo, tag := ref, ""
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		repo, tag = ref[:i], ref[i:]
	}
	return scheme + path.Join(repo, cellPath) + tag
}
