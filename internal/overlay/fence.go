package overlay

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	"github.com/aidonow/eva/internal/tenant"
)

// FenceConfigMap is the ConfigMap, beside the operator, that the admission policy
// eva-tenant-ingresses reads its parameters from (FenceParams). The operator's chart
// and each overlays/<env> make it from the environment the operator renders with.
const FenceConfigMap = "eva-tenant-ingress"

// FenceDigestKey is the key of FenceConfigMap holding the parameters' digest.
const FenceDigestKey = "digest"

// FenceParams are the data of FenceConfigMap for this environment: the domain, the
// ingress class, the keys of the annotations a tenant Ingress may carry, the codes no
// tenant's Ingress may serve (reservedCodes: the built-in list and the environment's, in
// lower case, as the hosts spell them), and their digest (FenceDigest), which every
// rendered Ingress carries too
// (tenant.AnnotationFence). One environment is read by both sides: the chart is
// installed with the fleet's own environment (evactl operator values), and an Ingress
// rendered for another is refused with both digests named, rather than for a host or
// an annotation the cluster does not expect.
func (s *Settings) FenceParams() map[string]string {
	params := map[string]string{
		"domain":             s.Domain,
		"ingressClassName":   s.IngressClassName,
		"ingressAnnotations": strings.Join(slices.Sorted(maps.Keys(s.IngressAnnotations)), ","),
		"reservedCodes":      strings.Join(s.reservedHosts(), ","),
	}
	params[FenceDigestKey] = FenceDigest(params)
	return params
}

// FenceDigest is "sha256:" and the hex SHA-256 of the parameters other than the digest
// itself, one "key=value\n" line each in the order of their keys. The chart computes
// the same lines with sprig's sha256sum (templates/tenant-ingress.yaml); a test renders
// the chart for every shipped environment and compares. Values hold no newline (the
// settings' validation refuses one in a domain, a class or an annotation key).
func FenceDigest(params map[string]string) string {
	var lines strings.Builder
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if k == FenceDigestKey {
			continue
		}
		lines.WriteString(k + "=" + params[k] + "\n")
	}
	sum := sha256.Sum256([]byte(lines.String()))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// reservedHosts are the reserved codes, built in (tenant.ReservedCodes) and the
// environment's, as the first label of a tenant host: lower case, sorted, once each.
func (s *Settings) reservedHosts() []string {
	var out []string
	for _, code := range append(slices.Clone(tenant.ReservedCodes), s.ReservedCodes...) {
		out = append(out, strings.ToLower(code))
	}
	slices.Sort(out)
	return slices.Compact(out)
}
