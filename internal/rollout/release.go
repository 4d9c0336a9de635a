package rollout

import (
	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// Finalizer holds a rollout being deleted while tenants still render it.
const Finalizer = "eva.aidonow.com/release-in-use"

// ReleaseOf returns the rollout whose versions the tenant namespace/name renders: the
// newest of its namespace's rollouts that admitted it (by creation time, then name), or
// nil when none did and the tenant renders the catalog's defaults. A rollout being
// deleted still counts until it is gone.
func ReleaseOf(rollouts []evav1.EvaRollout, namespace, name string) *evav1.EvaRollout {
	var newest *evav1.EvaRollout
	for i := range rollouts {
		r := &rollouts[i]
		if r.Namespace != namespace || !Admitted(r, name) {
			continue
		}
		if newest == nil || Newer(r, newest) {
			newest = r
		}
	}
	return newest
}

// Admitted reports whether a rollout gave its release to the tenant of its namespace
// called name.
func Admitted(r *evav1.EvaRollout, name string) bool {
	for _, ws := range r.Status.Waves {
		for _, e := range ws.Updated {
			if e.Name == name {
				return true
			}
		}
	}
	return false
}

// Newer orders rollouts: a created after b, or at the same second with a greater name.
func Newer(a, b *evav1.EvaRollout) bool {
	at, bt := a.CreationTimestamp.Time, b.CreationTimestamp.Time
	if !at.Equal(bt) {
		return at.After(bt)
	}
	return a.Name > b.Name
}

// Newest returns the newest of the rollouts, nil for none.
func Newest(rollouts []evav1.EvaRollout) *evav1.EvaRollout {
	var newest *evav1.EvaRollout
	for i := range rollouts {
		if newest == nil || Newer(&rollouts[i], newest) {
			newest = &rollouts[i]
		}
	}
	return newest
}

// WithRelease returns the tenant as it renders on a release: a copy whose spec.versions
// holds the release's version for every module of its tier it does not pin itself. The
// tenant is returned unchanged when there is no release.
func WithRelease(t *evav1.EvaTenant, r *evav1.EvaRollout, tierModules []string) *evav1.EvaTenant {
	if r == nil {
		return t
	}
	out := t.DeepCopy()
	for _, module := range tierModules {
		v, ok := r.Spec.Versions[module]
		if !ok {
			continue
		}
		if _, pinned := out.Spec.Versions[module]; pinned {
			continue
		}
		if out.Spec.Versions == nil {
			out.Spec.Versions = map[string]evav1.ModuleVersion{}
		}
		out.Spec.Versions[module] = v
	}
	return out
}
