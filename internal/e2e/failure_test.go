package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// TestFailedReleaseFailsTenantAndRecovers: a Starter tenant asks crm for more CPU than
// its limit (requests 500m, limits 200m). Each value is a valid quantity within the
// tier's bounds, so Eva renders it; the API server refuses the Deployment, so the real
// helm-controller's install fails, is remediated and retried until its retries are
// exhausted: the tenant is Failed with helm-controller's reason and message. Valid
// resources bring it back to Active, through helm-controller's own recovery.
//
// The failure is one the API server decides alone. It was a Deployment whose pods the
// namespace quota refused (four of 700m against 2 CPUs), until the quota let all four
// in, twice in two full suites: each remediation deletes the pods, kube-controller-
// manager then recounts the quota's usage from its own cache of pods, which under load
// has not yet seen the next install's pods, and admission lets more in (a known limit of
// Kubernetes' quota, kubernetes/kubernetes#123434).
func TestFailedReleaseFailsTenantAndRecovers(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := tenantNamespace(t, "e2e-failure")
	startOperator(t, ns)
	const code = "FAILED"
	tn := evaTenant(ns, code, evav1.TierStarter)
	crm := map[string]any{"resources": map[string]any{
		"requests": map[string]any{"cpu": "500m"}, "limits": map[string]any{"cpu": "200m"}}}
	if err := unstructured.SetNestedField(tn.Object, map[string]any{"crm": crm}, "spec", "helmValues"); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client.Create(ctx, tn); err != nil {
		t.Fatal(err)
	}

	// A deadline, not a budget: four attempts, each queued behind the other scenarios'
	// releases in helm-controller.
	created := time.Now()
	failed := waitFailed(t, tn, 10*time.Minute)
	t.Logf("Failed %s after it was created", time.Since(created).Round(time.Second))
	// What the tenant says is what helm-controller says of the release.
	hr := &unstructured.Unstructured{}
	hr.SetGroupVersionKind(helmReleaseGVK)
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: tenant.Namespace(code), Name: "crm"}, hr); err != nil {
		t.Fatal(err)
	}
	hrReady := conditionOf(hr, "Ready")
	if hrReady.Status != "False" || hrReady.Reason != "InstallFailed" {
		t.Fatalf("HelmRelease crm Ready %+v, want False InstallFailed; Stalled %+v", hrReady, conditionOf(hr, "Stalled"))
	}
	modules := conditionOf(failed, evav1.ConditionModulesDeployed)
	if modules.Status != "False" || !strings.Contains(modules.Message, "/crm") || !strings.Contains(modules.Message, "no retries left") ||
		!strings.Contains(modules.Message, hrReady.Reason+": "+hrReady.Message) {
		t.Errorf("ModulesDeployed %+v does not carry helm-controller's %s: %s", modules, hrReady.Reason, hrReady.Message)
	}
	if ready := conditionOf(failed, "Ready"); ready.Status != "False" || !strings.Contains(ready.Message, "/crm") {
		t.Errorf("Ready %+v does not name the failed release", ready)
	}
	// kstatus (Flux health checks, the flux CLI) reads the tenant as Failed, not as
	// still in progress.
	if res, err := kstatus.Compute(failed); err != nil || res.Status != kstatus.FailedStatus {
		t.Errorf("kstatus of the failed tenant: %v (%v), want Failed", res, err)
	}
	if n, seen := countEvents(t, ns, tn.GetName(), "ProvisioningFailed"); n != 1 {
		t.Errorf("%d ProvisioningFailed events, want 1:\n%s", n, strings.Join(seen, "\n"))
	}

	// The fix: requests within the limit.
	setSpec(t, tn, map[string]any{"crm": map[string]any{"resources": map[string]any{
		"requests": map[string]any{"cpu": "200m"}, "limits": map[string]any{"cpu": "500m"}}}}, "helmValues")
	// A deadline, not a budget: helm-controller's recovery waits its turn behind the
	// other scenarios' releases on a loaded machine (once more than 5 minutes).
	kubectlWaitReady(t, 10*time.Minute, tn)
	assertActive(t, tn)
	got, err := current(ctx, tn)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := kstatus.Compute(got); err != nil || res.Status != kstatus.CurrentStatus {
		t.Errorf("kstatus of the recovered tenant: %v (%v), want Current", res, err)
	}
	// Over the whole failure, one warning: helm-controller looking at the stalled release
	// again (it clears Stalled for a moment each time) did not make the tenant fail twice.
	if n, seen := countEvents(t, ns, tn.GetName(), "ProvisioningFailed"); n != 1 {
		t.Errorf("%d ProvisioningFailed events over the failure and the fix, want 1:\n%s", n, strings.Join(seen, "\n"))
	}
}

// waitFailed waits until the tenant's phase is Failed and returns it then.
func waitFailed(t *testing.T, tn *unstructured.Unstructured, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	var failed *unstructured.Unstructured
	poll(t, "tenant Failed", timeout, func() error {
		got, err := current(context.Background(), tn)
		if err != nil {
			return err
		}
		if phase, _, _ := unstructured.NestedString(got.Object, "status", "phase"); phase != string(evav1.PhaseFailed) {
			return fmt.Errorf("phase %q, conditions %v", phase, conditionsOf(got))
		}
		failed = got
		return nil
	})
	return failed
}

// setSpec sets one field of the tenant's spec, as a user editing it does.
func setSpec(t *testing.T, tn *unstructured.Unstructured, value any, field string) {
	t.Helper()
	got, err := current(context.Background(), tn)
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(got.Object, value, "spec", field); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
}

// conditionOf returns a condition of an object's status, empty when it has none.
func conditionOf(u *unstructured.Unstructured, ct string) (c struct {
	Status, Reason, Message string
	At                      time.Time // lastTransitionTime
}) {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, item := range raw {
		m, _ := item.(map[string]any)
		if m["type"] == ct {
			c.Status, c.Reason, c.Message = fmt.Sprint(m["status"]), fmt.Sprint(m["reason"]), fmt.Sprint(m["message"])
			c.At, _ = time.Parse(time.RFC3339, fmt.Sprint(m["lastTransitionTime"]))
		}
	}
	return c
}

// countEvents counts the events recorded about a tenant with a reason: Event objects,
// each counted with its series (a repeated event is one object with a series count).
func countEvents(t *testing.T, ns, name, reason string) (n int, seen []string) {
	t.Helper()
	var events eventsv1.EventList
	if err := cluster.Client.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Regarding.Kind != "EvaTenant" || e.Regarding.Name != name || e.Reason != reason {
			continue
		}
		n++
		seen = append(seen, fmt.Sprintf("%s %s %s: %s (series %v)", e.EventTime.Format(time.RFC3339Nano), e.ReportingInstance, e.Reason, e.Note, e.Series))
		if e.Series != nil && e.Series.Count > 1 {
			n += int(e.Series.Count) - 1
		}
	}
	return n, seen
}

// blockedGrace is the operator's --blocked-grace in the scenario that waits it out,
// shorter than status.DefaultBlockedGrace.
const blockedGrace = 20 * time.Second

// TestMissingChartVersionFailsTenant: a tenant pins crm to a chart version the chart
// repository does not have. helm-controller only ever retries (SourceNotReady, with
// source-controller's reason); once that has lasted the operator's --blocked-grace the
// tenant is Failed, Stalled for kstatus, with that message. Pinning an existing version
// brings it back to Active.
func TestMissingChartVersionFailsTenant(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := tenantNamespace(t, "e2e-missing-chart")
	startOperator(t, ns, "--blocked-grace="+blockedGrace.String())
	const code = "NOCHRT"
	tn := evaTenant(ns, code, evav1.TierStarter)
	if err := unstructured.SetNestedField(tn.Object, map[string]any{"crm": "9.9.9"}, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client.Create(ctx, tn); err != nil {
		t.Fatal(err)
	}
	waitBlocked(t, tn, "SourceNotReady", "9.9.9")

	setSpec(t, tn, map[string]any{"crm": "1.4.0"}, "versions")
	kubectlWaitReady(t, 4*time.Minute, tn)
	assertActive(t, tn)
}

// waitBlocked waits until the tenant is Failed because its crm release is blocked: once
// helm-controller's reason (SourceNotReady, for example) has lasted blockedGrace,
// ModulesDeployed is ReleaseBlocked with that reason and a message mentioning what is
// missing, and kstatus computes Failed. The tenant turned Stalled at least blockedGrace
// and less than the default grace after the release was blocked: the operator's flag,
// not the default, decided.
func waitBlocked(t *testing.T, tn *unstructured.Unstructured, reason, mentions string) {
	t.Helper()
	failed := waitFailed(t, tn, status.DefaultBlockedGrace+3*time.Minute)
	modules := conditionOf(failed, evav1.ConditionModulesDeployed)
	_, sinceText, found := strings.Cut(modules.Message, "/crm: "+reason+" since ")
	if modules.Reason != status.ReasonReleaseBlocked || !found || !strings.Contains(modules.Message, mentions) {
		t.Fatalf("ModulesDeployed %+v: want helm-controller's %s naming %s", modules, reason, mentions)
	}
	sinceText, _, _ = strings.Cut(sinceText, "Z: ")
	since, err := time.Parse(time.RFC3339, sinceText+"Z")
	if err != nil {
		t.Fatalf("ModulesDeployed %q: the time the release was blocked since: %v", modules.Message, err)
	}
	if waited := conditionOf(failed, "Stalled").At.Sub(since); waited < blockedGrace || waited >= status.DefaultBlockedGrace {
		t.Errorf("the tenant was Stalled %s after its release was blocked (%s), want at least --blocked-grace=%s and less than the default %s",
			waited, since, blockedGrace, status.DefaultBlockedGrace)
	}
	if res, err := kstatus.Compute(failed); err != nil || res.Status != kstatus.FailedStatus {
		t.Errorf("kstatus of the blocked tenant: %v (%v), want Failed", res, err)
	}
}
