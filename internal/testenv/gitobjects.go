package testenv

import (
	"fmt"
	"io"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// GitObjects calls visit with every blob and every commit message a repository
// stores, reachable or not (a secret written as a blob and then refused would still be
// in .git), each named "blob <hash>" or "commit <hash>". It returns how many blobs it
// visited, so a scan of an empty or wrong repository can be told from a clean one.
func GitObjects(dir string, visit func(what string, data []byte)) (int, error) {
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", dir, err)
	}
	blobs, err := repo.BlobObjects()
	if err != nil {
		return 0, err
	}
	n := 0
	err = blobs.ForEach(func(b *object.Blob) error {
		r, err := b.Reader()
		if err != nil {
			return err
		}
		defer r.Close()
		data, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		n++
		visit("blob "+b.Hash.String(), data)
		return nil
	})
	if err != nil {
		return n, err
	}
	commits, err := repo.CommitObjects()
	if err != nil {
		return n, err
	}
	return n, commits.ForEach(func(c *object.Commit) error {
		visit("commit "+c.Hash.String(), []byte(c.Message))
		return nil
	})
}
