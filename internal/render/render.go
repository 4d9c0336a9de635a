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
}

// Bundle is the rendered tenant: every object pure-cluster mode applies, in apply
// order, with the environment's patches applied.
type Bundle struct {
	Code      string
	Namespace string
	objects   []object
	// known holds the Helm values the releases were marshalled from, so that writing
	// them does not decode their JSON again.
	known manifest.KnownJSON
	// secrets are the tenant's encrypted Secrets to publish, as Eva writes them.
	secrets []EncryptedSecret
	// encoded holds every object's manifest document, encoded once (encode), one after
	// the other; object i's is encoded[offsets[i]:offsets[i+1]].
	encoded []byte
	offsets []int
}

// object is one rendered object: typed as built, and as plain data once something
// (a patch, a caller of Objects) needed that form.
type object struct {
	typed runtime.Object
	plain map[string]any
	// pending are the patches that target the typed object and are not applied to it
	// yet: folded into edits, written in while it is written (manifest.EncodeTypedEdited),
	// or applied in order when the plain form is made. Only set while plain is nil.
	pending []*overlay.Patch
	edits   *manifest.Edits
	layer   Layer
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

// Bundle renders one tenant. The tenant must be valid; an invalid one is refused with
// the validation problems.
func (r *Renderer) Bundle(t *evav1.EvaTenant) (*Bundle, error) {
	if errs := r.Catalog.Validate(t); len(errs) > 0 {
		return nil, fmt.Errorf("tenant %s is invalid: %w", t.Name, errs.ToAggregate())
	}
	code := t.Spec.CapsuleCode
	if t.Spec.LifecycleOrDefault() == evav1.LifecycleActive && r.Env.Settings.Reserves(code) {
		return nil, fmt.Errorf("tenant %s: %w", t.Name, ReservedError(code, r.Env))
	}
	secrets, err := r.checkSecrets(t)
	if err != nil {
		return nil, err
	}
	b := &Bundle{Code: code, Namespace: tenant.Namespace(code), known: manifest.KnownJSON{}, secrets: secrets}
	s := &scope{r: r, t: t, code: code, ns: b.Namespace, tier: r.Catalog.Tiers[t.Spec.Tier], known: b.known}

	type builder struct {
		build func() (runtime.Object, error)
		layer Layer
	}
	builders := []builder{{s.namespace, Foundation}}
	if t.Spec.LifecycleOrDefault() == evav1.LifecycleActive {
		for _, build := range []func() (runtime.Object, error){s.serviceAccount, s.roleBinding, s.resourceQuota,
			s.limitRange, s.networkPolicy, s.chartRepository, s.eventsStream, s.commandsStream, s.alertRules} {
			builders = append(builders, builder{build, Foundation})
		}
		for _, module := range s.tier.Modules {
			builders = append(builders, builder{func() (runtime.Object, error) { return s.helmRelease(module) }, Workloads})
		}
		builders = append(builders, builder{s.seedJob, Workloads}, builder{s.ingress, Workloads})
	}
	for _, bl := range builders {
		obj, err := bl.build()
		if err != nil {
			return nil, fmt.Errorf("rendering tenant %s: %w", code, err)
		}
		if obj == nil {
			continue
		}
		o := object{typed: obj, layer: bl.layer}
		if err := o.patch(r.Env.Patches, b.known); err != nil {
			return nil, fmt.Errorf("tenant %s, environment %s: %w", code, r.Env.Name, err)
		}
		b.objects = append(b.objects, o)
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

// patch applies the environment's patches that target the object; only a targeted
// object is converted to plain data.
func (o *object) patch(patches []overlay.Patch, known manifest.KnownJSON) error {
	if len(patches) == 0 {
		return nil
	}
	meta, err := apimeta.Accessor(o.typed)
	if err != nil {
		return err
	}
	apiVersion, kind := o.typed.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
	id := overlay.Identity{APIVersion: apiVersion, Kind: kind, Name: meta.GetName(), Namespace: meta.GetNamespace(),
		Labels: meta.GetLabels(), Annotations: meta.GetAnnotations()}
	for i := range patches {
		p := &patches[i]
		if !p.Targets(id) {
			continue
		}
		if o.plain == nil && o.fold(p, known) {
			o.pending = append(o.pending, p)
			continue
		}
		if err := o.makePlain(known); err != nil {
			return fmt.Errorf("applying to %s: %w", overlay.Describe(id), err)
		}
		if o.plain, err = p.Apply(o.plain); err != nil {
			return fmt.Errorf("%s: applying to %s: %w", p.Source, overlay.Describe(id), err)
		}
	}
	return nil
}

// fold folds a patch into the typed object's edits, or says it cannot: a patch that is
// not a map-only strategic merge or a JSON 6902 patch of adds, replaces and removes, or
// one that reaches into a typed map or list. Once a patch cannot, the object goes the
// plain way with all its patches.
func (o *object) fold(p *overlay.Patch, known manifest.KnownJSON) bool {
	if o.edits == nil {
		ed, err := manifest.NewEdits(o.typed, known)
		if err != nil {
			return false
		}
		o.edits = ed
	}
	ok := false
	if m := p.MergeMap(); m != nil {
		ok = o.edits.Merge(m)
	} else if n := p.DirectOps(); n > 0 {
		ok = true
		for i := 0; i < n && ok; i++ {
			kind, path, value := p.DirectOp(i)
			ok = o.edits.Op(kind, path, value, func(doc any, depth int) (any, bool) { return p.ApplyDirectOp(i, doc, depth) })
		}
	}
	if !ok {
		o.edits = nil // half folded, perhaps: of no use
	}
	return ok
}

// makePlain converts the object to plain data, with its pending patches applied in
// order, unless it is already; known is the bundle's plain form of its Helm values.
func (o *object) makePlain(known manifest.KnownJSON) error {
	if o.plain != nil {
		return nil
	}
	m, err := manifest.ToMapKnown(o.typed, known)
	if err != nil {
		return err
	}
	for _, p := range o.pending {
		if m, err = p.Apply(m); err != nil {
			return fmt.Errorf("%s: %w", p.Source, err)
		}
	}
	o.plain, o.pending, o.edits = m, nil, nil
	return nil
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
		out[i] = b.objects[i].plainData(b.known)
	}
	return out
}

// ObjectsOfKind returns the bundle's objects of one kind as plain data, in apply
// order, converting only those (the chart check reads the HelmReleases alone). The
// maps belong to the bundle: copy before changing them.
func (b *Bundle) ObjectsOfKind(kind string) []map[string]any {
	var out []map[string]any
	for i := range b.objects {
		if b.objects[i].typed.GetObjectKind().GroupVersionKind().Kind == kind {
			out = append(out, b.objects[i].plainData(b.known))
		}
	}
	return out
}

// plainData is the object as plain data, converted once.
func (o *object) plainData(known manifest.KnownJSON) map[string]any {
	if err := o.makePlain(known); err != nil {
		// Every rendered type converts, and the pending patches were folded, so they apply;
		// a failure here is a programming error.
		panic(fmt.Sprintf("converting %T: %v", o.typed, err))
	}
	return o.plain
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
		return o.layer == layer && !slices.Contains(without, o.typed.GetObjectKind().GroupVersionKind().Kind)
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
		var err error
		switch {
		case o.plain != nil:
			err = manifest.Encode(buf, o.plain)
		case o.edits != nil:
			err = manifest.EncodeTypedEdited(buf, o.typed, o.edits, b.known)
		default:
			err = manifest.EncodeTypedKnown(buf, o.typed, b.known)
		}
		if err != nil {
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
	// known is the bundle's: the plain form of the values each release carries as JSON.
	known manifest.KnownJSON
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
