// Package tenant holds what Eva knows about tenants independent of any cluster: the
// catalog of modules and tiers, the naming of a tenant's objects, and the semantic
// validation shared by the CLI, the controller and the admission webhook.
package tenant

import (
	_ "embed"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

//go:embed catalog.yaml
var defaultCatalogYAML []byte

// Catalog describes the modules Eva deploys and what each tier gets.
type Catalog struct {
	// Modules by short name (crm, itsm, ...).
	Modules map[string]Module `json:"modules"`
	// Tiers by name; a tier missing here cannot be used by a tenant.
	Tiers map[evav1.Tier]TierSpec `json:"tiers"`
	// LimitRange holds the container defaults every tenant namespace gets.
	LimitRange LimitRangeDefaults `json:"limitRange"`
	// PlatformOwned lists dotted values paths no tenant may set in any module
	// (securityContext, serviceAccount, ...), on top of the built-in capsule and image.
	PlatformOwned []string `json:"platformOwned,omitempty"`
}

// Module is one deployable module: a Helm chart and its default version.
type Module struct {
	Chart       string `json:"chart"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
	// Values are the module's platform-wide Helm values, the base of every release.
	Values map[string]any `json:"values,omitempty"`
	// PlatformOwned lists dotted values paths of this module's chart no tenant may set,
	// on top of the catalog-wide list.
	PlatformOwned []string `json:"platformOwned,omitempty"`
}

// TierSpec is what a tier grants a tenant.
type TierSpec struct {
	// Modules deployed for the tier, in deployment order.
	Modules []string `json:"modules"`
	// Quota of the tenant namespace; nil means unrestricted (no ResourceQuota object).
	Quota *Quota `json:"quota,omitempty"`
	// Streams are the limits of each of the tenant's two JetStream streams.
	Streams StreamLimits `json:"streams"`
	// Account bounds the tenant's clients of NATS, in its own account (its JetStream
	// storage is its two streams'): required for every tier.
	Account AccountLimits `json:"account"`
	// Values are per-module Helm values for the tier, merged over the module's own.
	Values map[string]map[string]any `json:"values,omitempty"`
	// ValueLimits bound the replica counts and container resources a tenant's values may
	// ask for; required for every tier.
	ValueLimits ValueLimits `json:"valueLimits"`
}

// Quota is a tier's ResourceQuota: what its namespace's pods may request (cpu, memory,
// pods) and, so that small requests cannot hide large limits on shared nodes, what they
// may be limited to (limitsCPU, limitsMemory) and the node disk they may request.
type Quota struct {
	CPU    resource.Quantity `json:"cpu"`
	Memory resource.Quantity `json:"memory"`
	Pods   int64             `json:"pods"`
	// LimitsCPU and LimitsMemory bound the sum of the pods' limits (limits.cpu,
	// limits.memory); EphemeralStorage the sum of their node disk requests.
	LimitsCPU        resource.Quantity `json:"limitsCPU"`
	LimitsMemory     resource.Quantity `json:"limitsMemory"`
	EphemeralStorage resource.Quantity `json:"ephemeralStorage"`
}

// StreamLimits are the limits of one JetStream stream.
type StreamLimits struct {
	MaxMsgs  int64           `json:"maxMsgs"`
	MaxBytes int64           `json:"maxBytes"`
	MaxAge   metav1.Duration `json:"maxAge"`
	Replicas int             `json:"replicas"`
}

// AccountLimits are what a tenant's NATS account allows its clients: connections,
// subscriptions, the largest message (bytes) and JetStream consumers.
type AccountLimits struct {
	Connections   int64 `json:"connections"`
	Subscriptions int64 `json:"subscriptions"`
	MaxPayload    int64 `json:"maxPayload"`
	Consumers     int64 `json:"consumers"`
}

// LimitRangeDefaults are the default container requests and limits of a tenant
// namespace, and the bounds every container is held to beyond its tier's valueLimits.
type LimitRangeDefaults struct {
	DefaultCPU    resource.Quantity `json:"defaultCPU"`
	DefaultMemory resource.Quantity `json:"defaultMemory"`
	// MaxLimitRequestRatio bounds a container's limit over its request, per resource
	// (cpu, memory): a request of 1m cannot come with a limit of a whole node.
	MaxLimitRequestRatio RequestRatio `json:"maxLimitRequestRatio"`
	// MinCPU and MinMemory are the least a container may request.
	MinCPU    resource.Quantity `json:"minCPU"`
	MinMemory resource.Quantity `json:"minMemory"`
	// DefaultEphemeralStorage is the limit (and request) of node disk of a container that
	// sets none.
	DefaultEphemeralStorage resource.Quantity `json:"defaultEphemeralStorage"`
}

var (
	semverRE     = regexp.MustCompile(evav1.SemverPattern)
	moduleNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
)

// DefaultCatalog returns the catalog compiled into Eva.
func DefaultCatalog() *Catalog {
	c, err := ParseCatalog(defaultCatalogYAML)
	if err != nil {
		// The embedded catalog is checked by tests; failing here is a build defect.
		panic(fmt.Sprintf("embedded catalog is invalid: %v", err))
	}
	return c
}

// LoadCatalog reads a catalog from a YAML file; an empty path returns the default.
func LoadCatalog(path string) (*Catalog, error) {
	if path == "" {
		return DefaultCatalog(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading catalog: %w", err)
	}
	c, err := ParseCatalog(data)
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", path, err)
	}
	return c, nil
}

// ParseCatalog decodes a catalog strictly (unknown fields are errors) and checks it.
func ParseCatalog(data []byte) (*Catalog, error) {
	var c Catalog
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Catalog) check() error {
	var problems []string
	if len(c.Modules) == 0 {
		problems = append(problems, "modules: at least one module is required")
	}
	for _, name := range sortedKeys(c.Modules) {
		m := c.Modules[name]
		if !moduleNameRE.MatchString(name) {
			problems = append(problems, fmt.Sprintf("modules.%s: name must match %s", name, moduleNameRE))
		}
		if m.Chart == "" {
			problems = append(problems, fmt.Sprintf("modules.%s.chart: required", name))
		}
		if !semverRE.MatchString(m.Version) {
			problems = append(problems, fmt.Sprintf("modules.%s.version: %q is not a semantic version", name, m.Version))
		}
		problems = append(problems, checkOwnedList(fmt.Sprintf("modules.%s.platformOwned", name), m.PlatformOwned)...)
	}
	problems = append(problems, checkOwnedList("platformOwned", c.PlatformOwned)...)
	if len(c.Tiers) == 0 {
		problems = append(problems, "tiers: at least one tier is required")
	}
	for _, tier := range sortedKeys(c.Tiers) {
		spec := c.Tiers[tier]
		if !slices.Contains(evav1.Tiers, tier) {
			problems = append(problems, fmt.Sprintf("tiers.%s: unknown tier (the API allows %s)", tier, joinTiers()))
		}
		if len(spec.Modules) == 0 {
			problems = append(problems, fmt.Sprintf("tiers.%s.modules: at least one module is required", tier))
		}
		for _, m := range sortedKeys(spec.Values) {
			if !slices.Contains(spec.Modules, m) {
				problems = append(problems, fmt.Sprintf("tiers.%s.values.%s: module is not in the tier", tier, m))
			}
		}
		seen := map[string]bool{}
		for _, m := range spec.Modules {
			if _, ok := c.Modules[m]; !ok {
				problems = append(problems, fmt.Sprintf("tiers.%s.modules: %q is not a module of the catalog", tier, m))
			}
			if seen[m] {
				problems = append(problems, fmt.Sprintf("tiers.%s.modules: %q is listed twice", tier, m))
			}
			seen[m] = true
		}
		if spec.Quota == nil {
			problems = append(problems, fmt.Sprintf("tiers.%s.quota: required: every tier's tenants are bounded by a quota (to exempt one tenant, grant its code noQuota in the environment's entitlements)", tier))
		}
		if q := spec.Quota; q != nil && (q.CPU.Sign() <= 0 || q.Memory.Sign() <= 0 || q.Pods <= 0) {
			problems = append(problems, fmt.Sprintf("tiers.%s.quota: cpu, memory and pods must be positive", tier))
		}
		if q := spec.Quota; q != nil && (q.LimitsCPU.Cmp(q.CPU) < 0 || q.LimitsMemory.Cmp(q.Memory) < 0 || q.EphemeralStorage.Sign() <= 0) {
			problems = append(problems, fmt.Sprintf("tiers.%s.quota: limitsCPU and limitsMemory must be at least cpu and memory, and ephemeralStorage positive", tier))
		}
		// A limit the quota cannot honour would let validation pass tenants whose pods the
		// API server then refuses, one by one, after publishing.
		if q := spec.Quota; q != nil && int64(len(spec.Modules))*spec.ValueLimits.MaxReplicas > q.Pods {
			problems = append(problems, fmt.Sprintf("tiers.%s.valueLimits: %d modules at maxReplicas %d exceed the quota of %d pods",
				tier, len(spec.Modules), spec.ValueLimits.MaxReplicas, q.Pods))
		}
		problems = append(problems, checkValueLimits(fmt.Sprintf("tiers.%s.valueLimits", tier), spec.ValueLimits)...)
		s := spec.Streams
		if s.MaxMsgs <= 0 || s.MaxBytes <= 0 || s.MaxAge.Duration <= 0 || s.Replicas < 1 || s.Replicas > 5 {
			problems = append(problems, fmt.Sprintf("tiers.%s.streams: maxMsgs, maxBytes and maxAge must be positive and replicas 1..5", tier))
		}
		if a := spec.Account; a.Connections <= 0 || a.Subscriptions <= 0 || a.MaxPayload <= 0 || a.Consumers <= 0 {
			problems = append(problems, fmt.Sprintf("tiers.%s.account: connections, subscriptions, maxPayload and consumers must be positive", tier))
		}
	}
	if c.LimitRange.DefaultCPU.Sign() <= 0 || c.LimitRange.DefaultMemory.Sign() <= 0 || c.LimitRange.DefaultEphemeralStorage.Sign() <= 0 {
		problems = append(problems, "limitRange: defaultCPU, defaultMemory and defaultEphemeralStorage must be positive")
	}
	problems = append(problems, c.LimitRange.check()...)
	if len(problems) > 0 {
		return fmt.Errorf("invalid catalog:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

// Tier returns the spec of a tier and whether the catalog offers it.
func (c *Catalog) Tier(t evav1.Tier) (TierSpec, bool) {
	s, ok := c.Tiers[t]
	return s, ok
}

// ModulesOf returns the modules of a tier in deployment order (nil for an unknown tier).
func (c *Catalog) ModulesOf(t evav1.Tier) []string {
	return c.Tiers[t].Modules
}

// TierHasModule reports whether module belongs to tier.
func (c *Catalog) TierHasModule(t evav1.Tier, module string) bool {
	return slices.Contains(c.Tiers[t].Modules, module)
}

// ModuleVersion returns the chart version of a module for a tenant: its pin, or the
// catalog default.
func (c *Catalog) ModuleVersion(t *evav1.EvaTenant, module string) string {
	if v, ok := t.Spec.Versions[module]; ok && v != "" {
		return string(v)
	}
	return c.Modules[module].Version
}

func joinTiers() string {
	names := make([]string, len(evav1.Tiers))
	for i, t := range evav1.Tiers {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
