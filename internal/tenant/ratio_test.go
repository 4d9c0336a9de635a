package tenant

import (
	"strings"
	"testing"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// TestLimitsAreBoundedByRequests: a container's values may not request less than the
// LimitRange's minimum, nor ask a limit more than maxLimitRequestRatio times its request
// (a Customer of 4 CPUs of requests ran 40 CPUs of limits with 1m requests); within
// both, and with only one of the two given, they pass.
func TestLimitsAreBoundedByRequests(t *testing.T) {
	c := DefaultCatalog()
	cases := map[string]struct {
		values string
		want   string // the refused path and reason, "" to pass
	}{
		"the charts' own ratio": {"resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {cpu: 500m, memory: 512Mi}}", ""},
		"at the ratio":          {"resources: {requests: {cpu: 250m, memory: 256Mi}, limits: {cpu: 2, memory: 2Gi}}", ""},
		"limits alone":          {"resources: {limits: {cpu: 1, memory: 1Gi}}", ""},
		"requests alone":        {"resources: {requests: {cpu: 100m}}", ""},
		"a tiny request":        {"resources: {requests: {cpu: 1m}, limits: {cpu: 2}}", "resources.requests.cpu: Invalid value: must be at least 10m"},
		"cpu past the ratio":    {"resources: {requests: {cpu: 100m}, limits: {cpu: 1}}", "resources.limits.cpu: Invalid value: must be at most 8 times the request (100m)"},
		"memory past the ratio": {"resources: {requests: {memory: 64Mi}, limits: {memory: 1Gi}}", "resources.limits.memory: Invalid value: must be at most 8 times the request (64Mi)"},
		"a tiny memory request": {"resources: {requests: {memory: 1Mi}}", "resources.requests.memory: Invalid value: must be at least 16Mi"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs := c.Validate(hostileTenant(t, withTier(evav1.TierCustomer), withValues("crm", tc.values)))
			got := errs.ToAggregate()
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("refused: %v", got)
			case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want)):
				t.Errorf("got %v, want %q", got, tc.want)
			}
		})
	}
}
