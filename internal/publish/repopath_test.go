package publish

import (
	"errors"
	"strings"
	"testing"
)

func TestRepoPathAccepts(t *testing.T) {
	for in, want := range map[string]string{
		"":                 "",
		"clusters/dev":     "clusters/dev",
		"clusters/dev/":    "clusters/dev",
		"a":                "a",
		"a.b/c-d_e":        "a.b/c-d_e",
		"..a/b..":          "..a/b..",
		".github-pages/x":  ".github-pages/x",
		"tenants/.gitkeep": "tenants/.gitkeep",
		"with space/ok":    "with space/ok",
		"ünïcödé/folder":   "ünïcödé/folder",
	} {
		got, err := RepoPath(in)
		if err != nil || got != want {
			t.Errorf("RepoPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestRepoPathRefuses(t *testing.T) {
	for in, reason := range map[string]string{
		"../escape":               `".." segments`,
		"a/../../b":               `".." segments`,
		"a/..":                    `".." segments`,
		"..":                      `".." segments`,
		"/etc":                    "absolute paths",
		"/":                       "absolute paths",
		"//server/share":          "absolute paths",
		".git/hooks":              ".git component",
		"a/.git":                  ".git component",
		"a/.GIT/config":           ".git component",
		".git./hooks":             ".git component",
		"GIT~1/hooks":             ".git component",
		"a//b":                    "empty segment",
		"a/b//":                   "empty segment",
		"./a":                     `"." segments`,
		".":                       `"." segments`,
		"a/./b":                   `"." segments`,
		`a\b`:                     "backslashes",
		`..\..\escape`:            "backslashes",
		"a\nb":                    "non-printable",
		"a\x00b":                  "non-printable",
		"a\x1b[31mred":            "non-printable",
		"a\u202eb":                "non-printable",
		"a\tb":                    "non-printable",
		"\xff\xfe":                "UTF-8",
		strings.Repeat("a", 2000): "longer than",
	} {
		got, err := RepoPath(in)
		if err == nil {
			t.Errorf("RepoPath(%q) = %q, want an error", in, got)
			continue
		}
		if !errors.Is(err, ErrRepoPath) || !strings.Contains(err.Error(), reason) {
			t.Errorf("RepoPath(%q): %v; want %q", in, err, reason)
		}
		if strings.ContainsAny(err.Error(), "\n\x00\x1b") || len(err.Error()) > 300 {
			t.Errorf("RepoPath(%q): the message echoes the path unescaped or unshortened: %q", in, err)
		}
	}
}

func TestSinksRefuseFilePathsOutsideTheTree(t *testing.T) {
	for _, p := range []string{"../x.yaml", "/abs.yaml", ".git/hooks/pre-commit", "a//b", "", "tenants/../../x"} {
		if err := checkFilePath(p); err == nil {
			t.Errorf("checkFilePath(%q) accepted", p)
		}
	}
	if err := checkFilePath("tenants/devusr/manifests.yaml"); err != nil {
		t.Error(err)
	}
}

func FuzzRepoPath(f *testing.F) {
	for _, s := range []string{"", "a/b", "../x", ".git", "a\\b", "a/./b", "x/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := RepoPath(p)
		if err != nil {
			return
		}
		// Whatever is accepted stays inside the tree and is canonical.
		if got != "" {
			for _, seg := range strings.Split(got, "/") {
				if seg == "" || seg == "." || seg == ".." || isGitDir(seg) {
					t.Fatalf("RepoPath(%q) = %q holds segment %q", p, got, seg)
				}
			}
		}
		if again, err := RepoPath(got); err != nil || again != got {
			t.Fatalf("RepoPath not idempotent on %q: %q, %v", got, again, err)
		}
	})
}
