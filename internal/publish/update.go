package publish

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aidonow/eva/internal/gitrepo"
	"github.com/aidonow/eva/internal/render"
)

// Update is a set of tenants to publish.
type Update struct {
	// Tenants maps a tenant folder (capsule code in lower case) to its files, with
	// paths relative to the tree root (render.TenantFiles). A nil slice removes the
	// tenant.
	Tenants map[string][]render.File
	// Full says the update is the whole fleet: published tenants it does not list are
	// removed (subject to Safety). The operator publishes partial updates; evactl
	// publishes full ones.
	Full bool
	// DeliveryDir is the folder of the tenants' delivery files the root kustomization
	// lists (render.Renderer.DeliveryDir); empty means render.FluxDir.
	DeliveryDir string
	// Adopt lists the tenant folders this update may take when they were published
	// before owners were recorded (their foundation names none): every folder of a full
	// update from the tenant files, which a review admitted, and an EvaTenant's folder
	// only when that EvaTenant has published before.
	Adopt map[string]bool
}

// deliveryDir is the folder the root kustomization lists.
func (u Update) deliveryDir() string {
	if u.DeliveryDir == "" {
		return render.FluxDir
	}
	return u.DeliveryDir
}

// Sink is where rendered tenants are published: a git branch or an OCI artifact. The
// operator and evactl use the same sinks.
type Sink interface {
	// Publish writes the update on top of what is published and returns the revision
	// now published. Nothing is published when it returns an error.
	Publish(ctx context.Context, u Update, s Safety) (*Result, error)
}

// clone copies the update's map (merge fills it in for full updates).
func (u Update) clone() Update {
	c := Update{Tenants: make(map[string][]render.File, len(u.Tenants)), Full: u.Full, DeliveryDir: u.DeliveryDir, Adopt: u.Adopt}
	for d, files := range u.Tenants {
		c.Tenants[d] = files
	}
	return c
}

// FullUpdate groups a rendered tree into a full update, which adopts every folder it
// lists; its delivery folder is the one the tree's files are in.
func FullUpdate(files []render.File) Update {
	u := Update{Tenants: map[string][]render.File{}, Full: true, Adopt: map[string]bool{}}
	for _, f := range files {
		if d := tenantOf(f.Path); d != "" {
			u.Tenants[d] = append(u.Tenants[d], f)
			u.Adopt[d] = true
			if !strings.HasPrefix(f.Path, render.TenantsDir+"/") {
				u.DeliveryDir, _, _ = strings.Cut(f.Path, "/")
			}
		}
	}
	return u
}

// merge applies an update to a published tree (paths relative to the managed folder)
// and returns the new tree and its plan. Only the tenants whose files differ change;
// every other file is kept as published, and the root kustomization is regenerated
// from the tenants the merged tree holds. hash stores a file's content and returns its
// blob id.
func merge(old gitrepo.Files, u Update, hash func([]byte) (gitrepo.Entry, error)) (gitrepo.Files, error) {
	next := gitrepo.Files{}
	for p, e := range old {
		next[p] = e
	}
	if u.Full {
		for d := range tenants(old) {
			if _, listed := u.Tenants[d]; !listed {
				u.Tenants[d] = nil
			}
		}
	}
	dirs := make([]string, 0, len(u.Tenants))
	for d := range u.Tenants {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		for p := range next {
			if tenantOf(p) == d {
				delete(next, p)
			}
		}
		for _, f := range u.Tenants[d] {
			if tenantOf(f.Path) != d {
				return nil, fmt.Errorf("file %s does not belong to tenant %s", f.Path, d)
			}
			e, err := hash(f.Data)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.Path, err)
			}
			next[f.Path] = e
		}
	}
	var codes []string
	for d := range tenants(next) {
		codes = append(codes, strings.ToUpper(d))
	}
	root := render.RootKustomizationFile(u.deliveryDir(), codes)
	e, err := hash(root.Data)
	if err != nil {
		return nil, err
	}
	next[root.Path] = e
	return next, nil
}

// Locked is a sink whose publishes hold a lock shared with the other publishers to the
// same destination (an OCI tag: registries have no conditional tag write, so two
// writers checking the tag at once could both push and one lose the other's tenants).
type Locked struct {
	Sink
	// Acquire blocks until the lock is held and returns the context that ends if it is
	// lost (a publish then stops) and its release.
	Acquire func(ctx context.Context) (held context.Context, release func(), err error)
}

// Publish implements Sink.
func (l *Locked) Publish(ctx context.Context, u Update, s Safety) (*Result, error) {
	held, release, err := l.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	res, err := l.Sink.Publish(held, u, s)
	if err != nil && ctx.Err() == nil && held.Err() != nil {
		return nil, fmt.Errorf("%w: %w", err, context.Cause(held))
	}
	return res, err
}
