package tenantfile

import (
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/aidonow/eva/internal/tenant"
)

// serverSetMeta are metadata fields the API server (or a controller) sets. A tenant
// file copied from `kubectl get -o yaml` carries them, and a hostile one could use
// finalizers or ownerReferences to block deletion or have the garbage collector delete
// the tenant with a foreign owner; the decoder has fields for them, so they are refused
// here, from the YAML, before decoding.
var serverSetMeta = map[string]string{
	"uid":                        "set by the API server",
	"resourceVersion":            "set by the API server",
	"generation":                 "set by the API server",
	"creationTimestamp":          "set by the API server",
	"deletionTimestamp":          "set by the API server",
	"deletionGracePeriodSeconds": "set by the API server",
	"managedFields":              "set by the API server",
	"selfLink":                   "set by the API server",
	"finalizers":                 "finalizers are managed by the operator (a foreign finalizer would block deletion forever)",
	"ownerReferences":            "ownerReferences are managed by the platform (an owner's deletion would delete the tenant)",
}

// checkFileOnlyRules reports what a tenant file must not carry even though the API
// type has a field for it: status, server-set metadata, platform labels and
// annotations, and an explicit wave 0.
func (t *Tenant) checkFileOnlyRules(root *yaml.Node) {
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "status":
			t.dec.fail(k, field.NewPath("status"), "status is written by the operator; remove it from the tenant file")
		case "metadata":
			t.checkMetadata(v)
		case "spec":
			t.checkSpec(v)
		}
	}
}

func (t *Tenant) checkMetadata(meta *yaml.Node) {
	if meta.Kind != yaml.MappingNode {
		return
	}
	for j := 0; j+1 < len(meta.Content); j += 2 {
		mk, mv := meta.Content[j], meta.Content[j+1]
		if why, ok := serverSetMeta[mk.Value]; ok {
			t.dec.fail(mk, field.NewPath("metadata", mk.Value), "%s; remove it from the tenant file", why)
			continue
		}
		if (mk.Value == "labels" || mk.Value == "annotations") && mv.Kind == yaml.MappingNode {
			p := field.NewPath("metadata", mk.Value)
			for l := 0; l+1 < len(mv.Content); l += 2 {
				if key := mv.Content[l]; tenant.PlatformKey(key.Value) {
					t.dec.fail(key, p.Key(key.Value), "the %s prefix is reserved: only the platform sets these %s; remove it from the tenant file",
						tenant.PlatformPrefix, mk.Value)
				}
			}
		}
	}
}

// checkSpec refuses an explicit wave 0. The Go type cannot tell 0 from absent (and
// renders both as wave 1), but the CRD's minimum of 1 refuses an explicit 0: evactl
// must agree with the API server, so the YAML node decides.
func (t *Tenant) checkSpec(spec *yaml.Node) {
	if spec.Kind != yaml.MappingNode {
		return
	}
	for j := 0; j+1 < len(spec.Content); j += 2 {
		k, v := spec.Content[j], spec.Content[j+1]
		if k.Value != "wave" || v.Kind != yaml.ScalarNode || v.Tag != "!!int" {
			continue
		}
		var wave int64
		if v.Decode(&wave) == nil && wave == 0 {
			t.dec.fail(v, field.NewPath("spec", "wave"),
				"0: must be 1 (internal), 2 (pilot) or 3 (fleet); leave wave out for the default 1 (the API server refuses 0)")
		}
	}
}
