package gitrepo

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// TestEditMatchesFullRebuild applies random edits incrementally and checks the root
// tree equals the one built from scratch from the resulting flat file list.
func TestEditMatchesFullRebuild(t *testing.T) {
	s := memory.NewStorage()
	rng := rand.New(rand.NewPCG(7, 11))
	files := Files{}
	blob := func(data string) Entry {
		h, err := StoreBlob(s, []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		return Entry{Hash: h, Mode: filemode.Regular}
	}
	for i := range 200 {
		files[fmt.Sprintf("tenants/t%03d/manifests.yaml", i)] = blob(fmt.Sprint("m", i))
		files[fmt.Sprintf("flux/t%03d.yaml", i)] = blob(fmt.Sprint("f", i))
	}
	files["kustomization.yaml"] = blob("root")
	root, err := WriteTree(s, files)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 50 {
		changes := map[string]*Entry{}
		for range 1 + rng.IntN(6) {
			i := rng.IntN(260)
			p := fmt.Sprintf("tenants/t%03d/manifests.yaml", i)
			switch rng.IntN(3) {
			case 0:
				changes[p] = nil
				changes[fmt.Sprintf("flux/t%03d.yaml", i)] = nil
			default:
				e := blob(fmt.Sprint("m", i, "r", round))
				changes[p] = &e
				k := blob(fmt.Sprint("k", i))
				changes[fmt.Sprintf("tenants/t%03d/kustomization.yaml", i)] = &k
			}
		}
		next, built, err := NewView(s, root).Edit(changes)
		if err != nil {
			t.Fatal(err)
		}
		for p, e := range changes {
			if e == nil {
				delete(files, p)
			} else {
				files[p] = *e
			}
		}
		want, err := WriteTree(s, files)
		if err != nil {
			t.Fatal(err)
		}
		if next != want {
			t.Fatalf("round %d: incremental tree %s, full rebuild %s", round, next, want)
		}
		if len(built) == 0 || built[len(built)-1] != next {
			t.Fatalf("round %d: Edit did not report the root among the trees it built", round)
		}
		root = next
		// The view reads back what was written.
		flat, err := NewView(s, root).Files("")
		if err != nil {
			t.Fatal(err)
		}
		if len(flat) != len(files) {
			t.Fatalf("round %d: view lists %d files, want %d", round, len(flat), len(files))
		}
	}
	if empty, _, err := NewView(s, plumbing.ZeroHash).Edit(map[string]*Entry{"a/b": nil}); err != nil || !empty.IsZero() {
		t.Fatalf("deleting from an empty tree: %s %v", empty, err)
	}
}

// TestTreeEntryOrderIsGits: compareTreeEntries orders entries as git's rule says (the
// name, "/" appended for a directory), on names built to share prefixes with each other
// and with the bytes around "/" ("-" and "." sort before it, "0" after).
func TestTreeEntryOrderIsGits(t *testing.T) {
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab-.0/")
	for range 20000 {
		var entries [2]object.TreeEntry
		for i := range entries {
			name := make([]byte, 1+rng.IntN(4))
			for j := range name {
				name[j] = alphabet[rng.IntN(len(alphabet)-1)] // no "/" inside a name
			}
			entries[i] = object.TreeEntry{Name: string(name), Mode: filemode.Regular}
			if rng.IntN(2) == 0 {
				entries[i].Mode = filemode.Dir
			}
		}
		a, b := entries[0], entries[1]
		want := 0
		switch ka, kb := key(a), key(b); {
		case ka < kb:
			want = -1
		case ka > kb:
			want = 1
		}
		if got := compareTreeEntries(a, b); got != want {
			t.Fatalf("compare %q (%v) with %q (%v): %d, want %d", a.Name, a.Mode, b.Name, b.Mode, got, want)
		}
	}
}
