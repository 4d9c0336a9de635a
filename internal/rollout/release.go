package rollout

import (
	"encoding/json"
	"hash/fnv"
	"sort"

	"k8s.io/apimachinery/pkg/types"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// Finalizer holds a rollout being deleted while tenants still render a version of it.
const Finalizer = "eva.aidonow.com/release-in-use"

// Releases returns the rollouts of namespace that admitted the tenant called name with
// the UID uid ("" for a tenant file), oldest first (by creation time, then name). A
// rollout being deleted still counts until it is gone.
func Releases(rollouts []evav1.EvaRollout, namespace, name string, uid types.UID) []*evav1.EvaRollout {
	var out []*evav1.EvaRollout
	for i := range rollouts {
		if r := &rollouts[i]; r.Namespace == namespace && AdmissionOf(r, name, uid) != nil {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return Newer(out[j], out[i]) })
	return out
}

// Admitted reports whether a rollout gave its release to the tenant of its namespace
// called name.
func Admitted(r *evav1.EvaRollout, name string) bool { return Admission(r, name) != nil }

// Admission returns the rollout's record of giving its release to the tenant called
// name, whatever its UID, nil when it did not.
func Admission(r *evav1.EvaRollout, name string) *evav1.RolloutTenant {
	return AdmissionOf(r, name, "")
}

// AdmissionOf returns the rollout's record of giving its release to the tenant called
// name with the UID uid, nil when it did not. A record of another UID is another tenant
// that had the name (deleted since); a record or a tenant without one (a tenant file,
// or admitted before UIDs were recorded) is matched by name.
func AdmissionOf(r *evav1.EvaRollout, name string, uid types.UID) *evav1.RolloutTenant {
	for i := range r.Status.Waves {
		for j := range r.Status.Waves[i].Updated {
			if e := &r.Status.Waves[i].Updated[j]; e.Name == name && sameTenant(e.UID, uid) {
				return e
			}
		}
	}
	return nil
}

// sameTenant: two UIDs name the same tenant, or one of them is unknown.
func sameTenant(a, b types.UID) bool { return a == "" || b == "" || a == b }

// OnOlderRelease reports whether the tenant called name (with the UID uid), at
// generation, renders a release older than r that admitted it at that same generation
// (or before generations were recorded): if it is not Ready, that release may be why.
func OnOlderRelease(rollouts []evav1.EvaRollout, r *evav1.EvaRollout, name string, uid types.UID, generation int64) bool {
	rels := Releases(rollouts, r.Namespace, name, uid)
	for i := len(rels) - 1; i >= 0; i-- {
		if rels[i].Name == r.Name || !Newer(r, rels[i]) {
			continue
		}
		e := AdmissionOf(rels[i], name, uid)
		return e.Generation == 0 || e.Generation == generation
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

// WithReleases returns the tenant as it renders on the releases that reached it (oldest
// first): a copy whose spec.versions holds, for every module of its tier it does not pin
// itself, the version of the newest of them that names the module. Releases add up: a
// release of itsm does not take back the crm of an earlier one. The tenant is returned
// unchanged when no release reached it.
//
// A tenant that froze itself is rendered thawed once a security release admitted it:
// the release passes its freeze, and no edit of the tenant's (a new freeze reason
// included) takes the fix back. Its freeze still keeps every other release off it
// (the planner passes over frozen tenants).
func WithReleases(t *evav1.EvaTenant, releases []*evav1.EvaRollout, tierModules []string) *evav1.EvaTenant {
	if len(releases) == 0 {
		return t
	}
	out := t.DeepCopy()
	if thawedBy(t, releases) {
		out.Spec.Frozen = ""
	}
	for _, r := range releases {
		for module, v := range Changes(t, r, tierModules) {
			if out.Spec.Versions == nil {
				out.Spec.Versions = map[string]evav1.ModuleVersion{}
			}
			out.Spec.Versions[module] = v // a newer release overrides an older one
		}
	}
	return out
}

// Changes maps what a release changes of a tenant: each module of its tier that the
// release names and the tenant does not pin itself, to the release's version.
func Changes(t *evav1.EvaTenant, r *evav1.EvaRollout, tierModules []string) map[string]evav1.ModuleVersion {
	out := map[string]evav1.ModuleVersion{}
	for _, module := range tierModules {
		if _, pinned := t.Spec.Versions[module]; pinned {
			continue
		}
		if v, ok := r.Spec.Versions[module]; ok {
			out[module] = v
		}
	}
	return out
}

// Needed reports whether the tenant name (with the UID uid) still renders a version
// from r: r admitted it and, for some module r names, no newer rollout that admitted it
// names that module.
func Needed(rollouts []evav1.EvaRollout, r *evav1.EvaRollout, name string, uid types.UID) bool {
	rels := Releases(rollouts, r.Namespace, name, uid)
	for module := range r.Spec.Versions {
		for i := len(rels) - 1; i >= 0; i-- {
			if _, names := rels[i].Spec.Versions[module]; names {
				if rels[i].Name == r.Name {
					return true
				}
				break
			}
		}
	}
	return false
}

// thawedBy: one of the releases is a security release that admitted the frozen
// tenant (this tenant: its UID).
func thawedBy(t *evav1.EvaTenant, releases []*evav1.EvaRollout) bool {
	if t.Spec.Frozen == "" {
		return false
	}
	for _, r := range releases {
		if r.Spec.Security && AdmissionOf(r, t.Name, t.UID) != nil {
			return true
		}
	}
	return false
}

// GenerationOf is the generation an admission records of a tenant: its
// metadata.generation, or for a tenant file (which has none) a number that changes
// with its spec (a hash of it, never 0). A tenant whose owner changed it since its
// admission is then not judged by the gates, nor taken for a victim of an older release.
func GenerationOf(t *evav1.EvaTenant) int64 {
	if t.Generation != 0 {
		return t.Generation
	}
	data, err := json.Marshal(t.Spec) // struct fields in order, map keys sorted
	if err != nil {
		return 1
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	return int64(h.Sum64()>>1) | 1
}
