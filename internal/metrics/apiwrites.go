package metrics

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
)

// APIWritesName counts the operator's writes to the API server by resource and verb:
// what a tenant costs the control plane, and where a write loop is.
const APIWritesName = "eva_api_writes_total"

// CountWrites wraps cfg's transport so that every write made through it (and through
// every client made from it: the manager's, leader election's) is counted in
// eva_api_writes_total{resource, verb}, registered with reg. Dry runs, which write
// nothing, are counted under their own verb (dryrun-patch).
func CountWrites(cfg *rest.Config, reg prometheus.Registerer) error {
	writes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: APIWritesName, Help: "Writes the operator sent to the API server, by resource (with subresource) and verb.",
	}, []string{"resource", "verb"})
	if err := reg.Register(writes); err != nil {
		return err
	}
	inner := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if inner != nil {
			rt = inner(rt)
		}
		return writeCounter{next: rt, writes: writes}
	}
	return nil
}

// writeCounter is the counting round tripper.
type writeCounter struct {
	next   http.RoundTripper
	writes *prometheus.CounterVec
}

// writeVerbs are the API verbs of the HTTP methods that write.
var writeVerbs = map[string]string{http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete"}

func (w writeCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if verb, ok := writeVerbs[req.Method]; ok {
		if req.URL.Query().Has("dryRun") {
			// A dry run writes nothing (the drift check's confirmation of defaults).
			verb = "dryrun-" + verb
		}
		w.writes.WithLabelValues(ResourceOf(req.URL.Path), verb).Inc()
	}
	return w.next.RoundTrip(req)
}

// ResourceOf names the resource of an API path as resource.group[/subresource]
// ("leases.coordination.k8s.io", "evatenants.eva.aidonow.com/status", "namespaces"),
// "other" for a path that is not a resource's.
func ResourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return "other"
	}
	// A namespaced resource's path starts with its namespace; a namespace's own
	// subresources (status, finalize) do not make it one.
	if len(parts) >= 3 && parts[0] == "namespaces" && parts[2] != "status" && parts[2] != "finalize" {
		parts = parts[2:]
	}
	resource := parts[0]
	if group != "" {
		resource += "." + group
	}
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	return resource
}
