package metrics

import "testing"

func TestResourceOf(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces":                                                            "namespaces",
		"/api/v1/namespaces/eva-tenant-acmeco":                                          "namespaces",
		"/api/v1/namespaces/eva-tenant-acmeco/status":                                   "namespaces/status",
		"/api/v1/namespaces/eva-tenant-acmeco/resourcequotas/eva-quota":                 "resourcequotas",
		"/apis/coordination.k8s.io/v1/namespaces/eva-system/leases/code-acmeco":         "leases.coordination.k8s.io",
		"/apis/eva.aidonow.com/v1alpha1/namespaces/eva-system/evatenants/acmeco/status": "evatenants.eva.aidonow.com/status",
		"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/eva-tenant-acmeco":      "clusterrolebindings.rbac.authorization.k8s.io",
		"/api/v1/namespaces/eva-system/events":                                          "events",
		"/healthz":                                                                      "other",
	} {
		if got := ResourceOf(path); got != want {
			t.Errorf("ResourceOf(%q) = %q, want %q", path, got, want)
		}
	}
}
