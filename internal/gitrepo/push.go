package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
)

// ErrStale means the branch no longer points at the commit the push was built on:
// someone else pushed first. The caller fetches and rebuilds.
var ErrStale = errors.New("the branch moved")

// PushUpdate moves a branch from old to new with a pack holding exactly the objects
// given (those the new commit introduces), without walking the history or the tree the
// way a general push does: the cost is that of the change, not of the repository. The
// update only succeeds if the branch still points at old (zero: it must not exist), so
// it is always a fast-forward of what was read. A refusal by the server (a hook) comes
// back with what the server printed.
func PushUpdate(ctx context.Context, s storer.EncodedObjectStorer, url string, auth transport.AuthMethod,
	branch plumbing.ReferenceName, old, new plumbing.Hash, objects []plumbing.Hash) error {
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return fmt.Errorf("remote %s: %w", url, err)
	}
	cl, err := client.NewClient(ep)
	if err != nil {
		return fmt.Errorf("remote %s: %w", url, err)
	}
	sess, err := cl.NewReceivePackSession(ep, auth)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", url, err)
	}
	defer sess.Close()
	adv, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil && !errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return fmt.Errorf("reading refs of %s: %w", url, err)
	}
	current := plumbing.ZeroHash
	caps := capability.NewList()
	if adv != nil {
		if h, ok := adv.References[branch.String()]; ok {
			current = h
		}
		caps = adv.Capabilities
	}
	if current != old {
		return fmt.Errorf("%w: %s is at %s, not %s", ErrStale, branch.Short(), current, old)
	}
	var pack bytes.Buffer
	if _, err := packfile.NewEncoder(&pack, s, false).Encode(objects, 10); err != nil {
		return fmt.Errorf("packing objects: %w", err)
	}
	req := packp.NewReferenceUpdateRequestFromCapabilities(caps)
	var progress bytes.Buffer
	if caps.Supports(capability.Sideband64k) {
		_ = req.Capabilities.Set(capability.Sideband64k)
		req.Progress = &progress
	} else if caps.Supports(capability.Sideband) {
		_ = req.Capabilities.Set(capability.Sideband)
		req.Progress = &progress
	}
	req.Commands = []*packp.Command{{Name: branch, Old: old, New: new}}
	req.Packfile = noopCloser{&pack}
	status, err := sess.ReceivePack(ctx, req)
	if err == nil && status != nil {
		err = status.Error()
	}
	if err == nil {
		return nil
	}
	msg := ServerMessage(&progress)
	if isStaleRefError(err.Error()) && !strings.Contains(msg, "hook") {
		return fmt.Errorf("%w: %v", ErrStale, err)
	}
	if msg != "" {
		return fmt.Errorf("pushing to %s: %w (server said: %s)", url, err, msg)
	}
	return fmt.Errorf("pushing to %s: %w", url, err)
}

type noopCloser struct{ *bytes.Buffer }

func (noopCloser) Close() error { return nil }

func isStaleRefError(s string) bool {
	for _, marker := range []string{"fetch first", "non-fast-forward", "failed to lock", "cannot lock ref", "failed to update ref", "stale info"} {
		if strings.Contains(s, marker) {
			return true
		}
	}
	return false
}

// ServerMessage turns what a server printed on the progress channel into one line.
func ServerMessage(progress *bytes.Buffer) string {
	var lines []string
	for _, l := range strings.Split(progress.String(), "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "remote:"))
		if l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}
