package gitrepo

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// git runs the git command line in dir: the index EditIndex writes must read the same
// with the reference implementation.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeFile(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// stage returns the index entry for a file written in the worktree, as PublishChanges
// makes it.
func stage(t *testing.T, dir, rel, content string) *IndexEntry {
	t.Helper()
	writeFile(t, dir, rel, content)
	fi, err := os.Stat(filepath.Join(dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	// The blob is stored first, as PublishChanges does.
	if h := git(t, dir, "hash-object", "-w", rel); h != BlobHash([]byte(content)).String() {
		t.Fatalf("git hashes %s as %s", rel, h)
	}
	return &IndexEntry{Hash: BlobHash([]byte(content)), Mode: filemode.Regular, Size: uint32(fi.Size()), ModTime: fi.ModTime()}
}

// TestEditIndexMatchesGit edits an index git wrote (with its cached-tree extension):
// a changed, an added (sorting between others and at the end) and a removed file, then
// git, having committed the same worktree itself, sees a clean status and the same
// staged tree.
func TestEditIndexMatchesGit(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	for _, f := range []string{"a/one.yaml", "a/two.yaml", "b/three.yaml", "kustomization.yaml"} {
		writeFile(t, dir, f, f+"\n")
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "first")
	git(t, dir, "write-tree") // makes git store the cached trees extension

	changes := map[string]*IndexEntry{
		"a/two.yaml":   stage(t, dir, "a/two.yaml", "changed\n"),
		"a/one5.yaml":  stage(t, dir, "a/one5.yaml", "added between\n"),
		"z/last.yaml":  stage(t, dir, "z/last.yaml", "added at the end\n"),
		"b/three.yaml": nil,
	}
	if err := os.Remove(filepath.Join(dir, "b/three.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := EditIndex(filepath.Join(dir, ".git", "index"), changes); err != nil {
		t.Fatal(err)
	}
	if st := git(t, dir, "status", "--porcelain", "--untracked-files=all"); st != "" {
		// Staged changes show in the first column; none may be unstaged or untracked.
		for _, line := range strings.Split(st, "\n") {
			if line[1] != ' ' {
				t.Errorf("not staged as written: %q", line)
			}
		}
	}
	staged := git(t, dir, "write-tree")
	git(t, dir, "add", "-A")
	if want := git(t, dir, "write-tree"); staged != want {
		t.Fatalf("the edited index stages tree %s, git's own add stages %s", staged, want)
	}
	if files := git(t, dir, "ls-files"); files != "a/one.yaml\na/one5.yaml\na/two.yaml\nkustomization.yaml\nz/last.yaml" {
		t.Fatalf("index lists:\n%s", files)
	}
}

// TestEditIndexRefusesOtherFormats leaves an index of another version alone.
func TestEditIndexRefusesOtherFormats(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	writeFile(t, dir, "a.yaml", "a\n")
	git(t, dir, "add", "-A")
	git(t, dir, "update-index", "--index-version", "4")
	index := filepath.Join(dir, ".git", "index")
	before, _ := os.ReadFile(index)
	err := EditIndex(index, map[string]*IndexEntry{"a.yaml": nil})
	if !errors.Is(err, ErrIndexFormat) {
		t.Fatalf("version 4 index: %v, want ErrIndexFormat", err)
	}
	after, _ := os.ReadFile(index)
	if string(before) != string(after) {
		t.Fatal("a refused index was changed")
	}
	if err := os.WriteFile(index, append(before[:len(before)-1:len(before)-1], before[len(before)-1]^1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := EditIndex(index, nil); !errors.Is(err, ErrIndexFormat) {
		t.Fatalf("corrupt checksum: %v, want ErrIndexFormat", err)
	}
}
