// Package publish puts rendered tenant trees where Flux reads them: a local git
// repository, a remote git branch, or an OCI artifact. Every sink compares the render
// with what is published, refuses unsafe removals, and writes only what changed.
package publish

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/aidonow/eva/internal/gitrepo"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenant"
)

// Plan is the difference between a published tree and a new render, by tenant.
type Plan struct {
	Added, Changed, Removed []string // tenant folders (capsule codes in lower case)
	// Published and Rendered count the tenants on each side.
	Published, Rendered int
	// Partial marks an update that lists only some tenants (the operator's): the
	// mass-deletion guard, which protects against empty or unreadable full renders,
	// does not apply to it.
	Partial bool
}

// Empty reports whether nothing changes.
func (p *Plan) Empty() bool { return len(p.Added)+len(p.Changed)+len(p.Removed) == 0 }

// Summary lists the changes for a commit message or a log line.
func (p *Plan) Summary() string {
	var b strings.Builder
	line := func(label string, dirs []string) {
		if len(dirs) > 0 {
			codes := make([]string, len(dirs))
			for i, d := range dirs {
				codes[i] = strings.ToUpper(d)
			}
			fmt.Fprintf(&b, "%s: %s\n", label, strings.Join(codes, ", "))
		}
	}
	line("Added", p.Added)
	line("Changed", p.Changed)
	line("Removed", p.Removed)
	return b.String()
}

// tenantOf returns the tenant folder a tree path belongs to, or "" for shared files.
func tenantOf(p string) string {
	if rest, ok := strings.CutPrefix(p, render.TenantsDir+"/"); ok {
		dir, _, _ := strings.Cut(rest, "/")
		return dir
	}
	for _, dir := range render.DeliveryDirs {
		if rest, ok := strings.CutPrefix(p, dir+"/"); ok && !strings.Contains(rest, "/") {
			return strings.TrimSuffix(rest, path.Ext(rest))
		}
	}
	return ""
}

// tenants lists the tenant folders present in a tree.
func tenants(files gitrepo.Files) map[string]bool {
	out := map[string]bool{}
	for p := range files {
		if d := tenantOf(p); d != "" && strings.HasSuffix(p, "/"+render.ManifestsFile) {
			out[d] = true
		}
	}
	return out
}

// MakePlan compares two flat trees (paths relative to the managed folder).
func MakePlan(old, new gitrepo.Files) *Plan {
	oldT, newT := tenants(old), tenants(new)
	p := &Plan{Published: len(oldT), Rendered: len(newT)}
	changed := map[string]bool{}
	for path, e := range new {
		if o, ok := old[path]; !ok || o.Hash != e.Hash {
			if d := tenantOf(path); d != "" && oldT[d] {
				changed[d] = true
			}
		}
	}
	for path := range old {
		if _, ok := new[path]; !ok {
			if d := tenantOf(path); d != "" && oldT[d] && newT[d] {
				changed[d] = true
			}
		}
	}
	for d := range newT {
		if !oldT[d] {
			p.Added = append(p.Added, d)
		}
	}
	for d := range oldT {
		if !newT[d] {
			p.Removed = append(p.Removed, d)
		}
	}
	for d := range changed {
		p.Changed = append(p.Changed, d)
	}
	slices.Sort(p.Added)
	slices.Sort(p.Changed)
	slices.Sort(p.Removed)
	return p
}

// Safety options of a publish.
type Safety struct {
	// AllowMassDelete lets a render of no tenants, or of fewer than half of those
	// published, replace a non-empty tree.
	AllowMassDelete bool
	// Moved are the tenant folders removed because their tenant moved to another
	// cell's tree: the mass-delete check does not count them as published (a move off
	// a cell's last tenant empties its tree, and loses nothing).
	Moved []string
}

// decommissionedMarker is the namespace label a decommissioned tenant's bundle carries.
var decommissionedMarker = []byte(render.LabelLifecycle + ": Decommissioned\n")

// Decommissioned says whether a published foundation manifest is a Decommissioned
// bundle's (its Namespace carries the lifecycle label Decommissioned): the only bundle
// a publish removes, and the last step a move's source publishes.
func Decommissioned(foundation []byte) bool { return bytes.Contains(foundation, decommissionedMarker) }

// Check refuses plans that would lose tenants: removing a tenant whose published
// bundle was not Decommissioned, or removing most of the fleet at once (an empty or
// unreadable input). readPublished returns a published file's content.
func (p *Plan) Check(s Safety, readPublished func(path string) ([]byte, error)) error {
	published := p.Published
	for _, d := range p.Removed {
		if slices.Contains(s.Moved, d) {
			published--
		}
	}
	if !s.AllowMassDelete && !p.Partial && published > 0 && (p.Rendered == 0 || p.Rendered*2 < published) {
		return fmt.Errorf("refusing to publish %d tenant(s) over %d published (removing %s); "+
			"an empty or partly unreadable input looks like this: pass --allow-mass-delete if it is meant",
			p.Rendered, p.Published, codeList(p.Removed))
	}
	var active []string
	for _, d := range p.Removed {
		data, err := readPublished(path.Join(render.TenantsDir, d, render.ManifestsFile))
		if err != nil {
			return fmt.Errorf("reading published bundle of %s: %w", strings.ToUpper(d), err)
		}
		if !Decommissioned(data) {
			active = append(active, d)
		}
	}
	if len(active) > 0 {
		return fmt.Errorf("refusing to remove tenant(s) %s: their published bundle is not Decommissioned; "+
			"set spec.lifecycle: Decommissioned and publish that first", codeList(active))
	}
	return nil
}

// ErrOtherOwner is the refusal to replace a tenant folder another owner published: a
// tenant file's folder by an EvaTenant of the same code, or one EvaTenant's by another.
var ErrOtherOwner = errors.New("the tenant's folder is another owner's")

// OwnerRefusal is ErrOtherOwner for the tenant folders (Dirs) of an update: nothing of
// the update was published, and publishing it without them may succeed (the Batcher
// does: one tenant's refusal never holds back the others of its batch).
type OwnerRefusal struct {
	// Reasons says, by tenant folder, why it was refused; each names only its own tenant.
	Reasons map[string]string
}

func (e *OwnerRefusal) Error() string {
	reasons := make([]string, 0, len(e.Reasons))
	for _, d := range slices.Sorted(maps.Keys(e.Reasons)) {
		reasons = append(reasons, e.Reasons[d])
	}
	return strings.Join(reasons, "; ")
}

// Unwrap makes errors.Is(err, ErrOtherOwner) hold.
func (e *OwnerRefusal) Unwrap() error { return ErrOtherOwner }

// checkOwners refuses an update that changes a published tenant folder whose owner
// (render.OwnerOf its foundation: an EvaTenant's UID, or a tenant file) is not the
// update's: one owner per code, on every path. A folder published before owners were
// recorded has none: only an update that adopts it (Update.Adopt) may take it, or a
// kubectl EvaTenant would take a legacy file tenant's folder, and the file tenant would
// then be refused its own. Removals need no check: only a Decommissioned bundle is
// removed (Check), and publishing one is a change. readPublished returns a published
// file's content. The message names no owner.
func checkOwners(u Update, changed []string, readPublished func(path string) ([]byte, error)) error {
	refusal := &OwnerRefusal{Reasons: map[string]string{}}
	for _, d := range changed {
		foundation := path.Join(render.TenantsDir, d, render.ManifestsFile)
		old, err := readPublished(foundation)
		if err != nil {
			return fmt.Errorf("reading published bundle of %s: %w", strings.ToUpper(d), err)
		}
		var now string
		for _, f := range u.Tenants[d] {
			if f.Path == foundation {
				now = render.OwnerOf(f.Data)
			}
		}
		switch was := render.OwnerOf(old); {
		case was == "" && !u.Adopt[d]:
			refusal.Reasons[d] = fmt.Sprintf("refusing to publish tenant %s: %v (published before owners "+
				"were recorded, by no tenant this one can show it is); publish the tenant files once with evactl, which adopts "+
				"such folders, or remove the folder", strings.ToUpper(d), ErrOtherOwner)
		case was != "" && now != was:
			refusal.Reasons[d] = fmt.Sprintf("refusing to publish tenant %s: %v (%s); one owner per code: "+
				"remove the other tenant first, or give this one another code", strings.ToUpper(d), ErrOtherOwner, ownerKind(was))
		}
	}
	if len(refusal.Reasons) > 0 {
		return refusal
	}
	return nil
}

// ownerKind says what kind of owner published a folder, never which one.
func ownerKind(owner string) string {
	if owner == tenant.FileOwner {
		return "a tenant file under tenants/ published it"
	}
	return "an EvaTenant applied to the cluster published it"
}

func codeList(dirs []string) string {
	if len(dirs) == 0 {
		return "none"
	}
	const most = 20
	codes := make([]string, 0, most)
	for i, d := range dirs {
		if i == most {
			codes = append(codes, fmt.Sprintf("and %d more", len(dirs)-most))
			break
		}
		codes = append(codes, strings.ToUpper(d))
	}
	return strings.Join(codes, ", ")
}
