package render

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
)

// MaxTenantManifestBytes bounds what one tenant renders: its objects encoded as
// published (the foundation's and the workloads' manifests, which carry the module
// releases and their values). Every change of a tenant is a new copy of its files in
// the repository (or artifact) all tenants share, so a tenant inflating them (helmValues
// nested deep, whose YAML indentation grows with the depth, take many times their JSON
// size) would grow everyone's history. The shipped tenants render under 20 KiB; the
// encrypted Secrets have their own budget (tenant.MaxSecretsBytes).
const MaxTenantManifestBytes = 512 << 10

// ErrOverBudget is wrapped by the error refusing a tenant whose rendered manifests take
// more than MaxTenantManifestBytes: a spec within every validation limit can still
// render too much, so a valid tenant may fail to render with it.
var ErrOverBudget = errors.New("rendered manifests over budget")

// checkBudget refuses a bundle whose encoded objects together take more than max bytes,
// naming the largest file and object.
func (r *Renderer) checkBudget(b *Bundle, max int) error {
	total := len(b.encoded)
	if total <= max {
		return nil
	}
	files := map[string]int{}
	largest := 0
	for i, o := range b.objects {
		files[r.fileOf(b.Code, o)] += b.encodedSize(i)
		if b.encodedSize(i) > b.encodedSize(largest) {
			largest = i
		}
	}
	file := slices.MaxFunc(slices.Sorted(maps.Keys(files)), func(a, b string) int { return files[a] - files[b] })
	return fmt.Errorf("tenant %s: %w: %d bytes, more than the %d a tenant's published files may take (its encrypted Secrets have their own); "+
		"the largest file is %s (%d bytes), the largest object %s (%d bytes): make its spec.helmValues smaller or less deeply nested",
		b.Code, ErrOverBudget, total, max, file, files[file], describeObject(b.objects[largest]), b.encodedSize(largest))
}

// fileOf names the published file an object of the bundle is written to (for
// messages): the foundation's or the workloads' manifests, or, for Argo CD, the
// delivery file whose Applications carry the module releases.
func (r *Renderer) fileOf(code string, o object) string {
	dir := path.Join(TenantsDir, DirName(code))
	switch {
	case r.ArgoCD() && o.kind == "HelmRelease":
		return path.Join(ArgoCDDir, DirName(code)+".yaml")
	case o.layer == Workloads:
		return path.Join(dir, WorkloadsDir, ManifestsFile)
	}
	return path.Join(dir, ManifestsFile)
}

// describeObject names an object of a bundle: its kind and name.
func describeObject(o object) string {
	return o.kind + " " + o.name
}
