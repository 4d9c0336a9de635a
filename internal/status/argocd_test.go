package status

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	argov1 "github.com/aidonow/eva/internal/argocd/v1alpha1"
	"github.com/aidonow/eva/internal/tenant"
)

// moduleApp is a module Application at chart 1.4.0 with values v, as Argo CD reports it
// after comparing the source with comparedValues.
func moduleApp(values, comparedValues, sync, revision, health, healthMsg string, op *argov1.OperationState) *argov1.Application {
	src := func(v string) *argov1.ApplicationSource {
		return &argov1.ApplicationSource{RepoURL: "https://charts.example.com", Chart: "eva-crm", TargetRevision: "1.4.0",
			Helm: &argov1.ApplicationSourceHelm{ReleaseName: "crm", ValuesObject: &runtime.RawExtension{Raw: []byte(v)}}}
	}
	return &argov1.Application{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{tenant.AnnotationSpecDigest: "sha256:1"}},
		Spec:       argov1.ApplicationSpec{Source: src(values)},
		Status: argov1.ApplicationStatus{
			Sync:           argov1.SyncStatus{Status: sync, Revision: revision, ComparedTo: &argov1.ComparedTo{Source: src(comparedValues)}},
			Health:         argov1.HealthStatus{Status: health, Message: healthMsg},
			OperationState: op,
		},
	}
}

// withResources gives app the resources Argo CD 3 reports with persisted resource
// health, or, with source appTree, without their health.
func withResources(app *argov1.Application, source string) *argov1.Application {
	health := func(status, msg string) *argov1.HealthStatus {
		if source == "appTree" {
			return nil
		}
		return &argov1.HealthStatus{Status: status, Message: msg}
	}
	app.Status.ResourceHealthSource = source
	app.Status.Resources = []argov1.ResourceStatus{
		{Kind: "ConfigMap", Namespace: "eva-tenant-x", Name: "crm-config", Status: "Synced"},
		{Kind: "Service", Namespace: "eva-tenant-x", Name: "crm", Status: "Synced", Health: health("Healthy", "")},
		{Group: "apps", Kind: "Deployment", Namespace: "eva-tenant-x", Name: "crm", Status: "Synced",
			Health: health("Degraded", `Deployment "crm" exceeded its progress deadline`)},
		{Group: "apps", Kind: "Deployment", Namespace: "eva-tenant-x", Name: "worker", Status: "Synced",
			Health: health("Progressing", "Waiting for rollout to finish: 0 of 1 updated replicas are available...")},
	}
	return app
}

func withCondition(app *argov1.Application) *argov1.Application {
	app.Status.Conditions = []argov1.ApplicationCondition{{Type: "ComparisonError", Message: "chart not found"}}
	return app
}

func manyDegraded(app *argov1.Application, n int) *argov1.Application {
	for i := range n {
		app.Status.Resources = append(app.Status.Resources, argov1.ResourceStatus{Group: "apps", Kind: "Deployment",
			Namespace: "eva-tenant-x", Name: fmt.Sprintf("d%d", i), Health: &argov1.HealthStatus{Status: "Degraded", Message: "failed"}})
	}
	return app
}

func TestApplicationReleaseVerdicts(t *testing.T) {
	now := time.Now()
	const v1, v2 = `{"replicaCount":1}`, `{"replicaCount": 2}`
	for _, tc := range []struct {
		name     string
		app      *argov1.Application
		digest   string
		status   metav1.ConditionStatus
		reason   string
		terminal bool
		mentions string
	}{
		{"missing", nil, "sha256:1", metav1.ConditionFalse, ReasonNotFound, false, "Application argocd/m: not found"},
		{"healthy", moduleApp(v1, `{"replicaCount": 1}`, "Synced", "1.4.0", "Healthy", "", nil), "sha256:1",
			metav1.ConditionTrue, ReasonReady, false, "Ready"},
		{"progressing", moduleApp(v1, v1, "Synced", "1.4.0", "Progressing", "Waiting for rollout", nil), "sha256:1",
			metav1.ConditionFalse, ReasonProgressing, false, "Progressing: Waiting for rollout"},
		{"degraded", moduleApp(v1, v1, "Synced", "1.4.0", "Degraded", "Deployment crm exceeded its progress deadline", nil), "sha256:1",
			metav1.ConditionFalse, ReasonReleaseStalled, true, "Degraded: Deployment crm exceeded its progress deadline"},
		// Argo CD 3: the Application's health has no message, its resources' have; the
		// last operation's "successfully synced" is not why it is Degraded.
		{"degraded, Argo CD 3", withResources(moduleApp(v1, v1, "Synced", "1.4.0", "Degraded", "",
			&argov1.OperationState{Phase: "Succeeded", Message: "successfully synced (all tasks run)"}), ""), "sha256:1",
			metav1.ConditionFalse, ReasonReleaseStalled, true,
			`Degraded: Deployment eva-tenant-x/crm: Deployment "crm" exceeded its progress deadline`},
		{"degraded, resource health kept out of the Application", withResources(moduleApp(v1, v1, "Synced", "1.4.0", "Degraded", "", nil),
			"appTree"), "sha256:1", metav1.ConditionFalse, ReasonReleaseStalled, true, "controller.resource.health.persist"},
		{"degraded, an error condition and no resource health", withCondition(moduleApp(v1, v1, "Synced", "1.4.0", "Degraded", "", nil)),
			"sha256:1", metav1.ConditionFalse, ReasonReleaseStalled, true, "health Degraded: ComparisonError: chart not found"},
		{"degraded, many resources", manyDegraded(moduleApp(v1, v1, "Synced", "1.4.0", "Degraded", "", nil), 40), "sha256:1",
			metav1.ConditionFalse, ReasonReleaseStalled, true, "Deployment eva-tenant-x/d4: failed; and 35 more"},
		{"progressing, Argo CD 3", withResources(moduleApp(v1, v1, "Synced", "1.4.0", "Progressing", "", nil), ""), "sha256:1",
			metav1.ConditionFalse, ReasonProgressing, false, "Progressing: Deployment eva-tenant-x/worker: Waiting for rollout"},
		{"sync failed after its retries", moduleApp(v1, v1, "OutOfSync", "1.4.0", "Missing", "",
			&argov1.OperationState{Phase: "Failed", Message: "one or more objects failed to apply", RetryCount: 5}), "sha256:1",
			metav1.ConditionFalse, ReasonReleaseStalled, true, "sync Failed after 5 retries: one or more objects failed to apply"},
		{"retrying", moduleApp(v1, v1, "OutOfSync", "1.4.0", "Missing", "",
			&argov1.OperationState{Phase: "Running", Message: "Retrying attempt #2"}), "sha256:1",
			metav1.ConditionFalse, ReasonProgressing, false, "sync OutOfSync, health Missing: Retrying attempt #2"},
		// The fix is in the Application, Argo CD has not compared it yet: its Degraded
		// is about the old values and must not fail the tenant again.
		{"degraded, about an older spec", moduleApp(v2, v1, "Synced", "1.4.0", "Degraded", "old", nil), "sha256:1",
			metav1.ConditionFalse, ReasonProgressing, false, "not yet updated"},
		{"an older render in the cluster", moduleApp(v1, v1, "Synced", "1.4.0", "Healthy", "", nil), "sha256:2",
			metav1.ConditionFalse, ReasonProgressing, false, "not yet updated"},
		{"another chart version", moduleApp(v1, v1, "Synced", "1.3.0", "Healthy", "", nil), "sha256:1",
			metav1.ConditionFalse, ReasonProgressing, false, "runs chart 1.3.0, want 1.4.0"},
		{"suspended", moduleApp(v1, v1, "Synced", "1.4.0", "Suspended", "", nil), "sha256:1",
			metav1.ConditionFalse, ReasonProgressing, false, "Suspended"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ApplicationRelease("crm", "argocd/m", "1.4.0", tc.digest, tc.app)
			v := releaseVerdict(r, now, DefaultBlockedGrace)
			if v.Status != tc.status || v.Reason != tc.reason || v.Terminal != tc.terminal || !strings.Contains(v.Message, tc.mentions) {
				t.Errorf("got %+v, want %s %s terminal=%v mentioning %q", v, tc.status, tc.reason, tc.terminal, tc.mentions)
			}
		})
	}
}

func TestApplicationDelivery(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	app := &argov1.Application{Status: argov1.ApplicationStatus{
		Sync: argov1.SyncStatus{Status: "Synced", Revision: commit}, Health: argov1.HealthStatus{Status: "Healthy"}}}
	d := ApplicationDelivery("argocd/eva-tenant-x", app)
	if !d.Found || d.LastAppliedRevision != commit || d.Ready == nil || d.Ready.Status != metav1.ConditionTrue {
		t.Errorf("synced and healthy: %+v", d)
	}
	app.Status.Sync.Status, app.Status.Health.Status = "OutOfSync", "Progressing"
	app.Status.OperationState = &argov1.OperationState{Phase: "Succeeded", SyncResult: &argov1.SyncOperationResult{Revision: "older"}}
	d = ApplicationDelivery("argocd/eva-tenant-x", app)
	if d.LastAppliedRevision != "older" || d.Ready.Status != metav1.ConditionFalse || d.Ready.Reason != "OutOfSync" {
		t.Errorf("out of sync: %+v %+v", d, d.Ready)
	}
	// What Provisioned says while the Application has not applied the published commit.
	v := deliveryVerdict(d, commit)
	if v == nil || !strings.Contains(v.Message, "Application argocd/eva-tenant-x: OutOfSync") {
		t.Errorf("verdict %+v", v)
	}
	if d := ApplicationDelivery("argocd/eva-tenant-x", nil); d.Found || deliveryVerdict(d, commit).Reason != ReasonNotFound {
		t.Errorf("missing: %+v", d)
	}
}
