package tenant

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/shard"
	"github.com/aidonow/eva/internal/sopsdoc"
)

// Size limits on Helm value overrides. A tenant object lives in etcd and its values are
// copied into every HelmRelease, so overrides are kept far below the object size limit.
const (
	// MaxModuleValuesBytes bounds one module's helmValues, serialised as JSON.
	MaxModuleValuesBytes = 32 * 1024
	// MaxTotalValuesBytes bounds all helmValues of a tenant, serialised as JSON.
	MaxTotalValuesBytes = 128 * 1024
	// MaxValuesDepth bounds the nesting of helmValues.
	MaxValuesDepth = 16
)

// ReservedValuesKey is the top-level values key Eva fills with the capsule identity;
// overrides may not replace it.
const ReservedValuesKey = "capsule"

// SecretMountsValuesKey is the top-level values key Eva fills with the Secrets a
// module's pods mount (spec.secretMounts): each module chart mounts them, and overrides
// may not name Secrets of their own.
const SecretMountsValuesKey = "secretMounts"

var (
	capsuleCodeRE  = regexp.MustCompile(evav1.CapsuleCodePattern)
	seedsVersionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]*$`)
	secretNameRE   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// Validate checks a tenant against the catalog and returns every problem found, each
// with the path of the field at fault. It checks what the CRD schema checks too, so a
// file is fully validated before it ever reaches an API server, and what only the
// catalog knows (which modules a tier has, secret-looking values, value sizes).
func (c *Catalog) Validate(t *evav1.EvaTenant) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateMeta(t)...)
	spec := field.NewPath("spec")
	errs = append(errs, validateCode(t.Spec.CapsuleCode, spec.Child("capsuleCode"))...)

	tierOK := false
	switch {
	case t.Spec.Tier == "":
		errs = append(errs, field.Required(spec.Child("tier"), "one of "+joinTiers()))
	case !slices.Contains(evav1.Tiers, t.Spec.Tier):
		errs = append(errs, field.NotSupported(spec.Child("tier"), t.Spec.Tier, evav1.Tiers))
	default:
		if _, ok := c.Tiers[t.Spec.Tier]; !ok {
			errs = append(errs, field.Invalid(spec.Child("tier"), t.Spec.Tier, "tier is not offered by the catalog"))
		} else {
			tierOK = true
		}
	}
	if l := t.Spec.Lifecycle; l != "" && l != evav1.LifecycleActive && l != evav1.LifecycleDecommissioned {
		errs = append(errs, field.NotSupported(spec.Child("lifecycle"), l,
			[]evav1.Lifecycle{evav1.LifecycleActive, evav1.LifecycleDecommissioned}))
	}
	if v := t.Spec.OperatorVersion; v != "" && !semverRE.MatchString(v) {
		errs = append(errs, field.Invalid(spec.Child("operatorVersion"), v, "must be a semantic version such as 1.4.0"))
	}
	if v := t.Spec.SeedsVersion; v != "" && (len(v) > 128 || !seedsVersionRE.MatchString(v)) {
		errs = append(errs, field.Invalid(spec.Child("seedsVersion"), v,
			"must be a git tag: letters, digits, '.', '_', '+' and '-', at most 128 characters"))
	}
	if w := t.Spec.Wave; w != 0 && (w < 1 || w > 3) {
		errs = append(errs, field.Invalid(spec.Child("wave"), w, "must be 1 (internal), 2 (pilot) or 3 (fleet)"))
	}

	moduleOf := func(p *field.Path, module string) field.ErrorList {
		if !tierOK {
			return nil // the tier error already explains it
		}
		if !c.TierHasModule(t.Spec.Tier, module) {
			return field.ErrorList{field.NotSupported(p, module, c.ModulesOf(t.Spec.Tier))}
		}
		return nil
	}
	for _, module := range sortedKeys(t.Spec.Versions) {
		p := spec.Child("versions").Key(module)
		errs = append(errs, moduleOf(p, module)...)
		if v := string(t.Spec.Versions[module]); !semverRE.MatchString(v) {
			errs = append(errs, field.Invalid(p, v, "must be an exact semantic version such as 1.4.0"))
		}
	}
	errs = append(errs, c.validateHelmValues(t, spec.Child("helmValues"), moduleOf)...)
	errs = append(errs, validateValuesFrom(t.Spec.ValuesFrom, spec.Child("valuesFrom"))...)
	errs = append(errs, validateSecretMounts(t, spec.Child("secretMounts"), moduleOf)...)
	errs = append(errs, validateSecrets(t, spec.Child("secrets"))...)
	errs = append(errs, validatePlacement(t.Spec.Placement, spec.Child("placement"))...)
	return errs
}

// maxPlacementLabels bounds spec.placement.labels, as the CRD does.
const maxPlacementLabels = 16

// validatePlacement holds spec.placement to the CRD's rules (a cell is a DNS label, at
// most 16 labels), so a tenant file evactl accepts is one the API server accepts, and
// its labels to what a cell's labels can be: a label no cell could carry is a typo.
func validatePlacement(pl *evav1.Placement, p *field.Path) field.ErrorList {
	if pl == nil {
		return nil
	}
	var errs field.ErrorList
	if pl.Cell != "" {
		for _, msg := range validation.IsDNS1123Label(pl.Cell) {
			errs = append(errs, field.Invalid(p.Child("cell"), pl.Cell, msg))
		}
	}
	if len(pl.Labels) > maxPlacementLabels {
		errs = append(errs, field.TooMany(p.Child("labels"), len(pl.Labels), maxPlacementLabels))
	}
	for _, k := range sortedKeys(pl.Labels) {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p.Child("labels"), k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(pl.Labels[k]) {
			errs = append(errs, field.Invalid(p.Child("labels").Key(k), pl.Labels[k], msg))
		}
	}
	return errs
}

// MaxSecretsBytes bounds a tenant's encrypted Secrets together: each is published into
// the shared repository with every change of them, so sixteen files of the per-file
// limit (sopsdoc.MaxBytes) would cost every tenant's repository a megabyte a change.
const MaxSecretsBytes = 256 << 10

// secretsBytes is the size of the tenant's encrypted Secrets.
func secretsBytes(t *evav1.EvaTenant) int {
	n := 0
	for _, s := range t.Spec.Secrets {
		n += len(s.Sops)
	}
	return n
}

// validateSecrets checks each encrypted Secret against the rules that keep it the
// tenant's own (sopsdoc.Check), without decrypting it; messages never quote a value.
func validateSecrets(t *evav1.EvaTenant, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if total := secretsBytes(t); total > MaxSecretsBytes {
		errs = append(errs, field.TooLong(p, fmt.Sprintf("%d bytes", total), MaxSecretsBytes))
	}
	seen := map[string]bool{}
	for i, s := range t.Spec.Secrets {
		ip := p.Index(i)
		if seen[s.Name] {
			errs = append(errs, field.Duplicate(ip.Child("name"), s.Name))
			continue
		}
		seen[s.Name] = true
		if s.Name == NATSMount {
			errs = append(errs, field.Invalid(ip.Child("name"), s.Name,
				"reserved: the modules mount the tenant's NATS credentials under this name"))
		}
		_, issues := sopsdoc.Check([]byte(s.Sops), SecretName(t.Spec.CapsuleCode, s.Name), Namespace(t.Spec.CapsuleCode))
		for _, is := range issues {
			msg := is.Message
			if is.Field != "" {
				msg = fmt.Sprintf("line %d, %s: %s", is.Line, is.Field, msg)
			}
			errs = append(errs, field.Invalid(ip.Child("sops"), "(encrypted Secret)", msg))
		}
	}
	return errs
}

// ValidateUpdate checks the transitions the API forbids: the capsule code never
// changes and a decommissioned tenant never becomes active again.
func ValidateUpdate(oldT, newT *evav1.EvaTenant) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if oldT.Spec.CapsuleCode != "" && newT.Spec.CapsuleCode != oldT.Spec.CapsuleCode {
		errs = append(errs, field.Forbidden(spec.Child("capsuleCode"), "capsuleCode is immutable"))
	}
	if oldT.Spec.LifecycleOrDefault() == evav1.LifecycleDecommissioned &&
		newT.Spec.LifecycleOrDefault() != evav1.LifecycleDecommissioned {
		errs = append(errs, field.Forbidden(spec.Child("lifecycle"), "lifecycle cannot change from Decommissioned back to Active"))
	}
	return errs
}

func validateMeta(t *evav1.EvaTenant) field.ErrorList {
	var errs field.ErrorList
	if t.APIVersion != evav1.GroupVersion.String() {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), t.APIVersion, "must be "+evav1.GroupVersion.String()))
	}
	if t.Kind != evav1.Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), t.Kind, "must be "+evav1.Kind))
	}
	meta := field.NewPath("metadata")
	if t.Name == "" {
		errs = append(errs, field.Required(meta.Child("name"), "a tenant needs a name, conventionally its capsule code in lower case"))
	} else {
		for _, msg := range validation.IsDNS1123Label(t.Name) {
			errs = append(errs, field.Invalid(meta.Child("name"), t.Name, msg))
		}
	}
	if t.Namespace != "" {
		for _, msg := range apivalidation.ValidateNamespaceName(t.Namespace, false) {
			errs = append(errs, field.Invalid(meta.Child("namespace"), t.Namespace, msg))
		}
	}
	if _, err := shard.Of(t.Labels); err != nil {
		errs = append(errs, field.Invalid(meta.Child("labels").Key(shard.Label), t.Labels[shard.Label], err.Error()))
	}
	return errs
}

// ReservedCodes are capsule codes no tenant may take: a tenant's Ingress host is
// <code>.<domain>, so these would answer for the platform's own services (Argo CD, a
// status page, a registry, a login page) under the tenants' domain.
var ReservedCodes = []string{
	"ADMINS", "ALERTS", "ARGOCD", "ASSETS", "CONSUL", "DEPLOY", "DOCKER", "GITHUB", "GITLAB",
	"HARBOR", "HEALTH", "ISTIOD", "JAEGER", "KIBANA", "LOGINS", "LOGOUT", "MAILER", "PORTAL",
	"PUBLIC", "SENTRY", "SIGNIN", "SIGNUP", "STATIC", "STATUS", "SYSTEM", "TRACES", "WEBHOK",
}

func validateCode(code string, p *field.Path) field.ErrorList {
	switch {
	case code == "":
		return field.ErrorList{field.Required(p, "six upper-case letters, for example DEVUSR")}
	case capsuleCodeRE.MatchString(code) && slices.Contains(ReservedCodes, code):
		return field.ErrorList{field.Forbidden(p, fmt.Sprintf(
			"%s is reserved: its host %s.<domain> names a platform service, not a tenant", code, strings.ToLower(code)))}
	case capsuleCodeRE.MatchString(code):
		return nil
	case capsuleCodeRE.MatchString(strings.ToUpper(code)):
		return field.ErrorList{field.Invalid(p, code, fmt.Sprintf("must be upper case: %s", strings.ToUpper(code)))}
	default:
		return field.ErrorList{field.Invalid(p, code, "must be exactly six upper-case letters A-Z")}
	}
}

func (c *Catalog) validateHelmValues(t *evav1.EvaTenant, p *field.Path, moduleOf func(*field.Path, string) field.ErrorList) field.ErrorList {
	var errs field.ErrorList
	total := 0
	limits, limited := c.Tiers[t.Spec.Tier]
	for _, module := range sortedKeys(t.Spec.HelmValues) {
		mp := p.Key(module)
		errs = append(errs, moduleOf(mp, module)...)
		raw := t.Spec.HelmValues[module].Raw
		total += len(raw)
		if len(raw) > MaxModuleValuesBytes {
			errs = append(errs, field.TooLong(mp, "", MaxModuleValuesBytes))
			continue
		}
		var values any
		if err := json.Unmarshal(raw, &values); err != nil {
			errs = append(errs, field.Invalid(mp, "", "not valid JSON: "+err.Error()))
			continue
		}
		obj, ok := values.(map[string]any)
		if !ok {
			errs = append(errs, field.Invalid(mp, "", "must be an object of Helm values"))
			continue
		}
		scan := valuesScan{owned: c.ownedPaths(module), tier: string(t.Spec.Tier), limits: limits.ValueLimits, ranges: c.LimitRange, limited: limited}
		errs = append(errs, scan.scan(obj, mp, nil, 1)...)
	}
	if total > MaxTotalValuesBytes {
		errs = append(errs, field.TooLong(p, "", MaxTotalValuesBytes))
	}
	return errs
}

// validateValuesFrom refuses every values reference: helm-controller writes a
// referenced value through Helm's --set parser (',' and '=' in it set other values) and
// Helm stores and quotes what it parsed, so no value Eva cannot read may reach a release
// that way.
func validateValuesFrom(refs []evav1.ValuesReference, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range refs {
		errs = append(errs, field.Forbidden(p.Index(i),
			"valuesFrom is refused: helm-controller parses a referenced value as Helm --set input, so ',' or '=' in it sets other values; "+
				"hand a Secret to a module with spec.secretMounts, and set other values in spec.helmValues"))
	}
	return errs
}

// IsSecretName reports whether name can name one of a tenant's Secrets (after its
// prefix): lower-case letters, digits and '-', at most 32.
func IsSecretName(name string) bool {
	return len(name) <= 32 && secretNameRE.MatchString(name)
}

// validateSecretMounts checks each mount names a module of the tier and one of the
// tenant's Secrets by its short name, once per module.
func validateSecretMounts(t *evav1.EvaTenant, p *field.Path, moduleOf func(*field.Path, string) field.ErrorList) field.ErrorList {
	var errs field.ErrorList
	seen := map[evav1.SecretMount]int{}
	for i, m := range t.Spec.SecretMounts {
		ip := p.Index(i)
		if m.Module == "" {
			errs = append(errs, field.Required(ip.Child("module"), "the module whose pods mount the Secret"))
		} else {
			errs = append(errs, moduleOf(ip.Child("module"), m.Module)...)
		}
		if m.Secret == "" {
			errs = append(errs, field.Required(ip.Child("secret"), "one of the tenant's Secrets, by its name after the tenant's prefix"))
		} else if !IsSecretName(m.Secret) {
			errs = append(errs, field.Invalid(ip.Child("secret"), m.Secret, "must be the name of one of spec.secrets: lower-case letters, digits and '-', at most 32"))
		}
		if j, dup := seen[m]; dup {
			errs = append(errs, field.Duplicate(ip, fmt.Sprintf("same mount as spec.secretMounts[%d]", j)))
		} else {
			seen[m] = i
		}
	}
	return errs
}
