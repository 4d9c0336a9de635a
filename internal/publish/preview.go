package publish

import (
	"fmt"

	"github.com/aidonow/eva/internal/gitrepo"
)

// Preview runs the checks a publish of u over the published tree runs (Plan.Check: no
// tenant lost; checkOwners: one owner per code) without publishing anything, and returns
// the plan: what evactl diff reports, so a pull request fails where the publish after
// its merge would. published is the tree as ReadDir, GitRemote.Read or OCI.Pull return
// it.
func Preview(published map[string][]byte, u Update, s Safety) (*Plan, error) {
	_, plan, err := checkedTree(published, u, s)
	return plan, err
}

// checkedTree merges u into the published tree old and checks the result as a publish
// does: the tree to publish, and its plan.
func checkedTree(old map[string][]byte, u Update, s Safety) (map[string][]byte, *Plan, error) {
	content := map[string][]byte{}
	store := func(data []byte) (gitrepo.Entry, error) {
		h := gitrepo.BlobHash(data)
		content[h.String()] = data
		return gitrepo.Entry{Hash: h}, nil
	}
	oldFiles := gitrepo.Files{}
	for p, data := range old {
		e, _ := store(data)
		oldFiles[p] = e
	}
	next, err := merge(oldFiles, u.clone(), store)
	if err != nil {
		return nil, nil, err
	}
	plan := MakePlan(oldFiles, next)
	plan.Partial = !u.Full
	read := func(p string) ([]byte, error) {
		if data, ok := old[p]; ok {
			return data, nil
		}
		return nil, fmt.Errorf("%s is not in the published tree", p)
	}
	if err := plan.Check(s, read); err != nil {
		return nil, plan, err
	}
	if err := checkOwners(u, plan.Changed, read); err != nil {
		return nil, plan, err
	}
	tree := make(map[string][]byte, len(next))
	for p, e := range next {
		tree[p] = content[e.Hash.String()]
	}
	return tree, plan, nil
}
