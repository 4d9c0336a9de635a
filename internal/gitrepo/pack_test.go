package gitrepo

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// TestWritePackReadsBackWithGit stages blobs of sizes around the pack header's
// boundaries, a tree and a commit, writes them as one pack, and has git verify the pack,
// read every object and check the repository; a go-git storage opened before sees the
// objects once reindexed, and a skipped object is left out.
func TestWritePackReadsBackWithGit(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	repo, err := gogit.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	_ = repo.Storer.HasEncodedObject(plumbing.ZeroHash) // loads the (empty) pack index now

	s := NewStaging()
	files := Files{}
	contents := map[string][]byte{}
	for _, size := range []int{0, 1, 15, 16, 2047, 2048, 1 << 21, 3<<20 + 7} {
		data := bytes.Repeat([]byte{byte('a' + size%26)}, size)
		name := "f" + strings.Repeat("x", size%7) + "-" + time.Duration(size).String()
		h, err := StoreBlob(s, data)
		if err != nil {
			t.Fatal(err)
		}
		files["d/"+name] = Entry{Hash: h, Mode: filemode.Regular}
		contents[h.String()] = data
	}
	skipped, _ := StoreBlob(s, []byte("left out\n"))
	tree, err := WriteTree(s, files)
	if err != nil {
		t.Fatal(err)
	}
	commit, err := WriteCommit(s, tree, plumbing.ZeroHash, object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1700000000, 0)}, "packed\n")
	if err != nil {
		t.Fatal(err)
	}
	wrote, err := s.WritePack(filepath.Join(dir, ".git", "objects"), func(h plumbing.Hash) bool { return h == skipped })
	if err != nil || !wrote {
		t.Fatalf("WritePack: %v %v", wrote, err)
	}
	git(t, dir, "update-ref", "refs/heads/main", commit.String())
	packs, _ := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "*.idx"))
	if len(packs) != 1 {
		t.Fatalf("packs: %v", packs)
	}
	git(t, dir, "verify-pack", packs[0])
	if fsck := git(t, dir, "fsck", "--strict", "--no-dangling"); strings.Contains(fsck, "error") {
		t.Fatalf("git fsck: %s", fsck)
	}
	for h, data := range contents {
		if got := git(t, dir, "cat-file", "blob", h); got != strings.TrimSpace(string(data)) {
			t.Fatalf("blob %s reads back %d bytes, want %d", h, len(got), len(data))
		}
	}
	if exec.Command("git", "-C", dir, "cat-file", "-e", skipped.String()).Run() == nil {
		t.Fatal("the skipped blob was written")
	}
	repo.Storer.(*filesystem.Storage).Reindex()
	if err := repo.Storer.HasEncodedObject(commit); err != nil {
		t.Fatalf("the storage does not see the packed commit after Reindex: %v", err)
	}
}
