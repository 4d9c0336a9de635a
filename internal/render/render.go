// Package render turns an EvaTenant into the objects that make up the tenant: a pure
// function of the tenant, the catalog and the environment, with no I/O, so that a pull
// request preview, a git commit and a cluster apply of the same tenant are identical.
package render

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/manifest"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/shard"
	"github.com/aidonow/eva/internal/tenant"
)

// Labels every rendered object carries besides the capsule, tier and wave labels.
const (
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelPartOf    = "app.kubernetes.io/part-of"
	// LabelLifecycle carries the tenant's lifecycle on its namespace, so a published
	// tree shows whether a tenant was decommissioned before it is removed.
	LabelLifecycle = "eva.aidonow.com/lifecycle"
	managedBy      = "eva"
)

// Names of per-tenant objects that do not depend on the capsule code.
const (
	DeployerName      = "eva-deployer"
	QuotaName         = "eva-quota"
	LimitRangeName    = "eva-defaults"
	NetworkPolicyName = "eva-tenant-isolation"
)

// Renderer renders tenants for one catalog and environment.
type Renderer struct {
	Catalog *tenant.Catalog
	Env     *overlay.Environment
	// TreePath is the folder of the repository the GitOps tree is published under
	// (publish git --path); the tenants' Flux Kustomizations point below it, because Flux
	// resolves their paths from the repository's root.
	TreePath string
	// Check, when set, is called with every rendered bundle; an error fails the render
	// of that tenant (evactl uses it to verify releases against their charts).
	Check func(*Bundle) error
	// Charts gives the published digest of each module chart version (the charts'
	// published.yaml), which each tenant's chart sources pin when the environment has
	// chartSource.url. Nil: every version follows its tag (refused with
	// chartSource.requireDigest).
	Charts ChartDigests
}

// ChartDigests says which OCI manifest digest a published chart version has.
type ChartDigests interface {
	Digest(chart, version string) (digest string, ok bool)
}

// Bundle is the rendered tenant: every object pure-cluster mode applies, in apply
// order, with the environment's patches applied.
type Bundle struct {
	Code      string
	Namespace string
	objects   []object
	// secrets are the tenant's encrypted Secrets to publish, as Eva writes them.
	secrets []EncryptedSecret
	// encoded holds every object's manifest document, encoded once (encode), one after
	// the other; object i's is encoded[offsets[i]:offsets[i+1]].
	encoded []byte
	offsets []int
}

// object is one rendered object: its plain form (the JSON data model), converted once
// when the bundle is rendered and patched by the environment, which is what every
// manifest of the bundle is written from.
type object struct {
	plain map[string]any
	// kind and name are the object's as built, before any patch: what selects it for a
	// layer manifest or a kind, and names it in messages.
	kind, name string
	layer      Layer
}

// Layer says which of a tenant's two Flux Kustomizations applies an object in GitOps
// mode: the foundation is applied and health-checked first, the workloads after it.
type Layer int

const (
	// Foundation: the namespace and what confines it (deployer account and binding,
	// quota, limits, network policy), the tenant's chart source when the environment
	// renders one per tenant, the streams and the alert rules. Quick to apply
	// and to become healthy.
	Foundation Layer = iota
	// Workloads: the module HelmReleases, the seed Job and the Ingress, whose readiness
	// takes minutes and is read from the objects themselves.
	Workloads
)

// ReservedError is the refusal of an Active tenant whose capsule code the environment
// reserves (reservedCodes): its host would answer for a platform service.
func ReservedError(code string, env *overlay.Environment) error {
	return fmt.Errorf("capsule code %s is reserved in environment %s (reservedCodes in its environment.yaml): "+
		"its host %s.%s belongs to a platform service, not a tenant", code, env.Name, strings.ToLower(code), env.Settings.Domain)
}

// EntitlementsOf names where an environment's entitlements are written, for the
// refusals that cite them.
func EntitlementsOf(env *overlay.Environment) string {
	return "entitlements of environment " + env.Name + " (entitlements in its " + overlay.SettingsFile + ")"
}

// Bundle renders one tenant. The tenant must be valid; an invalid one is refused with
// the validation problems.
func (r *Renderer) Bundle(t *evav1.EvaTenant) (*Bundle, error) {
	if errs := r.Catalog.Validate(t); len(errs) > 0 {
		return nil, fmt.Errorf("tenant %s is invalid: %w", t.Name, errs.ToAggregate())
	}
	if errs := r.Env.Settings.Entitlements.Check(t, EntitlementsOf(r.Env)); len(errs) > 0 {
		return nil, fmt.Errorf("tenant %s claims what it is not entitled to: %w", t.Name, errs.ToAggregate())
	}
	code := t.Spec.CapsuleCode
	if t.Spec.LifecycleOrDefault() == evav1.LifecycleActive && r.Env.Settings.Reserves(code) {
		return nil, fmt.Errorf("tenant %s: %w", t.Name, ReservedError(code, r.Env))
	}
	secrets, err := r.checkSecrets(t)
	if err != nil {
		return nil, err
	}
	b := &Bundle{Code: code, Namespace: tenant.Namespace(code), secrets: secrets}
	s := &scope{r: r, t: t, code: code, ns: b.Namespace, tier: r.Catalog.Tiers[t.Spec.Tier]}

	built, err := s.build()
	if err != nil {
		return nil, fmt.Errorf("rendering tenant %s: %w", code, err)
	}
	b.objects = make([]object, 0, len(built))
	for _, bl := range built {
		id, err := identityOf(bl.obj)
		if err != nil {
			return nil, fmt.Errorf("rendering tenant %s: %w", code, err)
		}
		plain, err := manifest.ToMap(bl.obj)
		if err != nil {
			return nil, fmt.Errorf("rendering tenant %s: %w", code, err)
		}
		if plain, err = patch(plain, id, r.Env.Patches); err != nil {
			return nil, fmt.Errorf("tenant %s, environment %s: %w", code, r.Env.Name, err)
		}
		b.objects = append(b.objects, object{plain: plain, kind: id.Kind, name: id.Name, layer: bl.layer})
	}
	if err := b.encode(); err != nil {
		return nil, err
	}
	if err := r.checkBudget(b, MaxTenantManifestBytes); err != nil {
		return nil, err
	}
	if r.Check != nil {
		if err := r.Check(b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// built is an object as a builder made it, typed, with the layer that applies it.
type built struct {
	obj   runtime.Object
	layer Layer
}

// build makes the tenant's objects, typed, in apply order: a decommissioned tenant keeps
// its namespace and the deployer account alone. The account stays because the publish
// that decommissions a tenant removes its HelmReleases in the same commit, and
// helm-controller uninstalls each release as that account: were it pruned with the rest
// of the foundation, helm-controller would skip the uninstall and leave the modules
// running. It goes with the namespace, when the tenant's files are removed.
func (s *scope) build() ([]built, error) {
	type builder struct {
		build func() (runtime.Object, error)
		layer Layer
	}
	builders := []builder{{s.namespace, Foundation}, {s.serviceAccount, Foundation}, {s.roleBinding, Foundation}}
	if s.t.Spec.LifecycleOrDefault() == evav1.LifecycleActive {
		for _, build := range []func() (runtime.Object, error){s.resourceQuota,
			s.limitRange, s.networkPolicy, s.natsAccount, s.eventsStream, s.commandsStream, s.alertRules} {
			builders = append(builders, builder{build, Foundation})
		}
		// Each module's chart source goes with its release, in the workloads: a chart that
		// cannot be fetched (a version never pushed) is that release's failure, which
		// status reads as one, never the foundation's (namespace, quota, streams).
		for _, module := range s.tier.Modules {
			builders = append(builders, builder{func() (runtime.Object, error) { return s.chartRepository(module) }, Workloads})
		}
		for _, module := range s.tier.Modules {
			builders = append(builders, builder{func() (runtime.Object, error) { return s.helmRelease(module) }, Workloads})
		}
		builders = append(builders, builder{s.seedJob, Workloads}, builder{s.ingress, Workloads})
	}
	out := make([]built, 0, len(builders))
	for _, bl := range builders {
		obj, err := bl.build()
		if err != nil {
			return nil, err
		}
		if obj != nil {
			out = append(out, built{obj, bl.layer})
		}
	}
	return out, nil
}

// identityOf is what the environment's patches select a built object by.
func identityOf(obj runtime.Object) (overlay.Identity, error) {
	meta, err := apimeta.Accessor(obj)
	if err != nil {
		return overlay.Identity{}, err
	}
	apiVersion, kind := obj.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
	return overlay.Identity{APIVersion: apiVersion, Kind: kind, Name: meta.GetName(), Namespace: meta.GetNamespace(),
		Labels: meta.GetLabels(), Annotations: meta.GetAnnotations()}, nil
}

// patch applies, in order, the patches that target the object as built (id) to its
// plain form.
func patch(plain map[string]any, id overlay.Identity, patches []overlay.Patch) (map[string]any, error) {
	for i := range patches {
		p := &patches[i]
		if !p.Targets(id) {
			continue
		}
		var err error
		if plain, err = p.Apply(plain); err != nil {
			return nil, fmt.Errorf("%s: applying to %s: %w", p.Source, overlay.Describe(id), err)
		}
	}
	return plain, nil
}

// ReleaseSpecDigests maps each rendered HelmRelease (by name) to its spec digest
// (tenant.AnnotationSpecDigest).
func (b *Bundle) ReleaseSpecDigests() map[string]string {
	out := map[string]string{}
	for _, obj := range b.Objects() {
		if obj["kind"] != "HelmRelease" {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		annotations, _ := meta["annotations"].(map[string]any)
		name, _ := meta["name"].(string)
		digest, _ := annotations[tenant.AnnotationSpecDigest].(string)
		out[name] = digest
	}
	return out
}

// Objects returns the bundle's objects as plain data (the JSON data model), in apply
// order. The maps belong to the bundle: copy before changing them.
func (b *Bundle) Objects() []map[string]any {
	out := make([]map[string]any, len(b.objects))
	for i := range b.objects {
		out[i] = b.objects[i].plain
	}
	return out
}

// ObjectsOfKind returns the bundle's objects of one kind (as built) as plain data, in
// apply order. The maps belong to the bundle: copy before changing them.
func (b *Bundle) ObjectsOfKind(kind string) []map[string]any {
	var out []map[string]any
	for i := range b.objects {
		if b.objects[i].kind == kind {
			out = append(out, b.objects[i].plain)
		}
	}
	return out
}

// Len returns the number of objects in the bundle.
func (b *Bundle) Len() int { return len(b.objects) }

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// Manifest returns the bundle as a multi-document YAML stream.
func (b *Bundle) Manifest() ([]byte, error) {
	return b.manifest(func(object) bool { return true })
}

// LayerManifest returns the objects of one layer, but those of the kinds in without, as
// a multi-document YAML stream (empty when none is left).
func (b *Bundle) LayerManifest(layer Layer, without ...string) ([]byte, error) {
	return b.manifest(func(o object) bool {
		return o.layer == layer && !slices.Contains(without, o.kind)
	})
}

// manifest is the documents of the objects keep selects, in order, from the encoding
// made once when the bundle was rendered. A contiguous run of objects (a layer: the
// foundation's come first) is a slice of it, capped so that appending to it copies;
// only a selection with gaps is copied together.
func (b *Bundle) manifest(keep func(object) bool) ([]byte, error) {
	first, last, kept := -1, -1, 0
	for i, o := range b.objects {
		if keep(o) {
			if first < 0 {
				first = i
			}
			last, kept = i, kept+1
		}
	}
	switch {
	case kept == 0:
		return []byte{}, nil
	case kept == last-first+1:
		start, end := b.offsets[first], b.offsets[last+1]
		return b.encoded[start:end:end], nil
	}
	var data []byte
	for i, o := range b.objects {
		if keep(o) {
			data = append(data, b.encoded[b.offsets[i]:b.offsets[i+1]]...)
		}
	}
	return data, nil
}

// encode writes each object's manifest document ("---" and the YAML) once, one after
// the other: the objects do not change once the bundle is rendered, and every manifest
// of the bundle (whole, per layer, per teardown step) is put together from this.
func (b *Bundle) encode() error {
	b.offsets = make([]int, len(b.objects)+1)
	buf := bufPool.Get().(*bytes.Buffer)
	defer func() { buf.Reset(); bufPool.Put(buf) }()
	for i, o := range b.objects {
		buf.WriteString("---\n")
		if err := manifest.Encode(buf, o.plain); err != nil {
			return fmt.Errorf("encoding tenant %s: %w", b.Code, err)
		}
		b.offsets[i+1] = buf.Len()
	}
	// The pooled buffer is reused: keep an exact copy.
	b.encoded = bytes.Clone(buf.Bytes())
	return nil
}

// encodedSize is the size of object i's document.
func (b *Bundle) encodedSize(i int) int { return b.offsets[i+1] - b.offsets[i] }

// Unstructured returns deep copies of the bundle's objects for a Kubernetes client.
func (b *Bundle) Unstructured() []*unstructured.Unstructured {
	objects := b.Objects()
	out := make([]*unstructured.Unstructured, len(objects))
	for i, obj := range objects {
		out[i] = &unstructured.Unstructured{Object: deepCopyMap(obj)}
	}
	return out
}

// UnstructuredLayer returns deep copies of the objects of one layer, in apply order.
func (b *Bundle) UnstructuredLayer(layer Layer) []*unstructured.Unstructured {
	objects := b.Objects()
	var out []*unstructured.Unstructured
	for i, obj := range objects {
		if b.objects[i].layer == layer {
			out = append(out, &unstructured.Unstructured{Object: deepCopyMap(obj)})
		}
	}
	return out
}

// scope holds what rendering one tenant needs.
type scope struct {
	r    *Renderer
	t    *evav1.EvaTenant
	code string
	ns   string
	tier tenant.TierSpec
	// token is tenantToken's result, computed once for all of the tenant's releases.
	token string
}

// labels returns the labels every object of the tenant carries, plus extra pairs.
func (s *scope) labels(extra ...string) map[string]string {
	l := map[string]string{
		tenant.LabelCapsule: s.code,
		tenant.LabelTier:    string(s.t.Spec.Tier),
		tenant.LabelWave:    strconv.Itoa(int(s.t.Spec.WaveOrDefault())),
		labelManagedBy:      managedBy,
		labelPartOf:         "eva",
	}
	if v := s.t.Labels[shard.Label]; v != "" { // validated by Catalog.Validate
		l[shard.Label] = v
	}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

// fluxShard is the Flux controller shard of the tenant's Flux objects ("" for the main
// controllers): overlay.FluxShards.ShardOf.
func (s *scope) fluxShard() string {
	return s.r.Env.Settings.FluxShards.ShardOf(s.code, s.t.Labels[shard.Label])
}

// fluxLabels are the labels of one of the tenant's Flux objects: its labels and, when
// the environment shards Flux, the shard key.
func (s *scope) fluxLabels(extra ...string) map[string]string {
	l := s.labels(extra...)
	if key := s.fluxShard(); key != "" {
		l[overlay.FluxShardKey] = key
	}
	return l
}

// DirName returns the folder of a tenant in the GitOps tree: its code in lower case.
func DirName(code string) string { return strings.ToLower(code) }

// deepCopyMap copies plain data, with whole numbers as int64, as the JSON data model
// holds them: an environment's patch brings YAML's int, which runtime.DeepCopyJSON (and
// so Unstructured.DeepCopy) refuses with a panic.
func deepCopyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = deepCopyValue(v)
	}
	return out
}

func deepCopyValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return deepCopyMap(x)
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = deepCopyValue(item)
		}
		return out
	case int:
		return int64(x)
	case int32:
		return int64(x)
	}
	return v
}
