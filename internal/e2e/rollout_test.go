package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/chartrepo"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// The crm chart versions of the rollout scenario, published by the test beside the
// suite's 1.4.0: one whose pods can never be scheduled, and the fixed one.
const (
	crmBroken = "1.6.0"
	crmFixed  = "1.5.0"
	crmBase   = "1.4.0"
)

// TestRolloutByWaveOnRealFlux: nine Starter tenants in three waves, on the real
// helm-controller. A release bringing crm 1.6.0, whose pods never schedule, halts in
// wave 1 and leaves waves 2 and 3 untouched (their HelmReleases' resourceVersions do not
// move). A newer release with crm 1.5.0 supersedes it and goes wave by wave, one tenant
// at a time in waves 1 and 2, the operator SIGKILLed and restarted in the middle of
// wave 2; a frozen wave-3 tenant is skipped and reported. Wave 3 allows every tenant at
// once (maxUpdate 100%), but the environment says helm-controller installs 0.2 releases
// a minute, one within the 5-minute ready timeout: the rollout admits one at a time and
// says why in its status. The order is asserted from the HelmReleases' history as a
// watch saw it: no wave-3 release moves to 1.5.0 before every wave-2 release is Ready
// on it, and never two releases update at once.
func TestRolloutByWaveOnRealFlux(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := tenantNamespace(t, "e2e-rollout")
	pushCrmVersions(t)
	env := environment(t, map[string]any{"releaseTimeout": "45s", "helmReleasesPerMinute": 0.2})
	op := startOperator(t, ns, "--overlays="+env)

	var tenants []*unstructured.Unstructured
	waveOf := map[string]int{}
	for w := 1; w <= 3; w++ {
		for i := range 3 {
			code := fmt.Sprintf("ROLL%c%c", 'A'+w-1, 'A'+i) // ROLLAA…ROLLCC: wave 1 is ROLLA*
			tn := evaTenant(ns, code, evav1.TierStarter)
			if err := unstructured.SetNestedField(tn.Object, int64(w), "spec", "wave"); err != nil {
				t.Fatal(err)
			}
			if err := cluster.Client.Create(ctx, tn); err != nil {
				t.Fatal(err)
			}
			tenants, waveOf[code] = append(tenants, tn), w
		}
	}
	kubectlWaitReady(t, 6*time.Minute, tenants...)
	// A live tenant is frozen before the releases: they must pass it over.
	setSpec(t, tenants[8], "customer's audit week", "frozen")
	poll(t, "the frozen tenant's releases suspended", time.Minute, func() error {
		hr := &unstructured.Unstructured{}
		hr.SetGroupVersionKind(helmReleaseGVK)
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: tenant.Namespace("ROLLCC"), Name: "crm"}, hr); err != nil {
			return err
		}
		if suspended, _, _ := unstructured.NestedBool(hr.Object, "spec", "suspend"); !suspended {
			return fmt.Errorf("crm not suspended")
		}
		return nil
	})
	// The suspension is written by the operator, then noted by helm-controller: the
	// snapshot below is taken once no crm release was written for 5 seconds.
	settledReleases(t, waveOf)
	history := watchReleases(t, waveOf)

	// 1. The broken release halts in wave 1.
	before := crmResourceVersions(t, waveOf)
	createRollout(t, ns, "crm-broken", crmBroken, "45s",
		map[string]any{"wave": int64(1), "maxUpdate": int64(1)},
		map[string]any{"wave": int64(2)}, map[string]any{"wave": int64(3)})
	halted := waitRollout(t, ns, "crm-broken", 5*time.Minute, evav1.RolloutHalted)
	if !strings.Contains(halted.Message, "ROLLAA not Ready on the release within 45s") {
		t.Errorf("halted for another reason: %s", halted.Message)
	}
	if n := len(halted.Waves[0].Updated); n != 1 {
		t.Errorf("wave 1 admitted %d tenants under maxUpdate 1 before halting", n)
	}
	time.Sleep(5 * time.Second) // a halted rollout admits nothing more
	for code, was := range crmResourceVersions(t, waveOf) {
		if waveOf[code] == 1 {
			continue
		}
		if was != before[code] {
			t.Errorf("%s (wave %d): crm HelmRelease changed while the rollout halted in wave 1: %s → %s; writers: %s",
				code, waveOf[code], before[code], was, writersOf(crmReleases(t, waveOf)[code]))
		}
	}

	// 2. The fixed release supersedes it and completes, the operator killed mid-wave-2.
	createRollout(t, ns, "crm-fixed", crmFixed, "",
		map[string]any{"wave": int64(1), "maxUpdate": int64(1), "bakeTime": "5s"},
		map[string]any{"wave": int64(2), "maxUpdate": int64(1), "bakeTime": "5s"},
		map[string]any{"wave": int64(3), "maxUpdate": "100%"})
	waitRollout(t, ns, "crm-broken", time.Minute, evav1.RolloutSuperseded)
	messages := watchRolloutMessages(t, ns, "crm-fixed")
	poll(t, "wave 2 under way", 6*time.Minute, func() error {
		st := rolloutStatus(t, ns, "crm-fixed")
		if len(st.Waves) < 2 || len(st.Waves[1].Updated) == 0 {
			return fmt.Errorf("%s: %s", st.Phase, st.Message)
		}
		return nil
	})
	op.Kill()
	t.Log("operator SIGKILLed in wave 2")
	startOperator(t, ns, "--overlays="+env)
	done := waitRollout(t, ns, "crm-fixed", 8*time.Minute, evav1.RolloutComplete)
	if done.Updated != 8 || done.Total != 9 {
		t.Errorf("updated %d of %d tenants, want 8 of 9 (one frozen)", done.Updated, done.Total)
	}
	if sk := done.Waves[2].Skipped; len(sk) != 1 || sk[0].Code != "ROLLCC" || !strings.Contains(sk[0].Reason, "audit week") {
		t.Errorf("wave 3 skipped %+v, want ROLLCC with its reason", sk)
	}
	for code, v := range crmVersions(t, waveOf) {
		want := crmFixed
		if code == "ROLLCC" {
			want = crmBase
		}
		if v != want {
			t.Errorf("%s runs crm %s after the rollout, want %s", code, v, want)
		}
	}
	frozen := &unstructured.Unstructured{}
	frozen.SetGroupVersionKind(helmReleaseGVK)
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: tenant.Namespace("ROLLCC"), Name: "crm"}, frozen); err != nil {
		t.Fatal(err)
	}
	if suspended, _, _ := unstructured.NestedBool(frozen.Object, "spec", "suspend"); !suspended {
		t.Error("the frozen tenant's HelmRelease is not suspended")
	}
	got, err := current(ctx, tenants[0])
	if err != nil {
		t.Fatal(err)
	}
	if rel, _, _ := unstructured.NestedString(got.Object, "status", "release"); rel != "crm-fixed" {
		t.Errorf("ROLLAA status.release %q, want crm-fixed", rel)
	}
	// What a release manager sees, with evactl as built.
	out, err := exec.Command(evactl, "rollout", "status", "-n", ns, "--kubeconfig", cluster.KubeConfig).CombinedOutput()
	if err != nil {
		t.Fatalf("evactl rollout status: %v\n%s", err, out)
	}
	for _, want := range []string{"crm-fixed  Complete  wave -  8/9 tenants  crm " + crmFixed, "wave 3  [####################] 2/2",
		"skipped ROLLCC: frozen: customer's audit week", "crm-broken  Superseded"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("evactl rollout status lacks %q:\n%s", want, out)
		}
	}
	history.check(t, waveOf)
	const capped = "admissions capped: 1 release(s) in flight on the main helm-controller, which installs 0.2 a minute (1 within readyTimeout 5m0s)"
	if seen := messages(); !slices.ContainsFunc(seen, func(m string) bool { return strings.Contains(m, capped) }) {
		t.Errorf("the rollout never said wave 3's admissions were capped (%q); its messages:\n%s", capped, strings.Join(seen, "\n"))
	}
}

// watchRolloutMessages records every status message of a rollout until the test ends;
// the function returned lists those seen so far.
func watchRolloutMessages(t *testing.T, ns, name string) func() []string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "eva.aidonow.com", Version: "v1alpha1", Kind: "EvaRolloutList"})
	w := watchObjects(t, list, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
	var mu sync.Mutex
	var seen []string
	go func() {
		for ev := range w.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok {
				msg, _, _ := unstructured.NestedString(u.Object, "status", "message")
				mu.Lock()
				if len(seen) == 0 || seen[len(seen)-1] != msg {
					seen = append(seen, msg)
				}
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// settledReleases returns the tenants' crm releases (crmResourceVersions) once none was
// written for 5 seconds: helm-controller may still note a release's status after it is
// Ready, which a snapshot taken at once would count as a change.
func settledReleases(t *testing.T, waveOf map[string]int) map[string]string {
	t.Helper()
	settled, stable := crmResourceVersions(t, waveOf), 0
	poll(t, "the tenants' releases settled", 2*time.Minute, func() error {
		now := crmResourceVersions(t, waveOf)
		if fmt.Sprint(now) != fmt.Sprint(settled) {
			settled, stable = now, 0
		}
		if stable++; stable < 5 {
			return fmt.Errorf("written within the last %ds", stable)
		}
		return nil
	})
	return settled
}

// pushCrmVersions publishes two more crm versions to the suite's registry, as a
// platform team does with evactl charts push: 1.5.0, and 1.6.0 whose pods ask for a
// node that does not exist.
func pushCrmVersions(t *testing.T) {
	t.Helper()
	pushCrm.Do(func() { pushCrmErr = pushCrmCharts(t.TempDir()) })
	if pushCrmErr != nil {
		t.Fatal(pushCrmErr)
	}
}

// pushCrm publishes the versions once for the scenarios that use them; crmPublished
// is what evactl charts push recorded of them.
var (
	pushCrm      sync.Once
	pushCrmErr   error
	crmPublished []chartrepo.Published
)

func pushCrmCharts(tmp string) error {
	for _, v := range []string{crmFixed, crmBroken} {
		dir := filepath.Join(tmp, v, "charts")
		crm := filepath.Join(dir, "eva-crm")
		if err := os.CopyFS(crm, os.DirFS(filepath.Join(chartsDir, "eva-crm"))); err != nil {
			return err
		}
		chartFile := filepath.Join(crm, "Chart.yaml")
		data, err := os.ReadFile(chartFile)
		if err != nil {
			return err
		}
		data = []byte(strings.Replace(string(data), "version: "+crmBase, "version: "+v, 1))
		if err := os.WriteFile(chartFile, data, 0o644); err != nil {
			return err
		}
		if v == crmBroken {
			deploy := filepath.Join(crm, "templates", "deployment.yaml")
			tpl, err := os.ReadFile(deploy)
			if err != nil {
				return err
			}
			tpl = []byte(strings.Replace(string(tpl), "      automountServiceAccountToken: false",
				"      automountServiceAccountToken: false\n      nodeSelector:\n        eva.aidonow.com/no-such-node: \"true\"", 1))
			if err := os.WriteFile(deploy, tpl, 0o644); err != nil {
				return err
			}
		}
		push := exec.Command(evactl, "charts", "push", "--charts", dir, "--to", chartSourceURL(), "--insecure")
		if out, err := push.CombinedOutput(); err != nil {
			return fmt.Errorf("evactl charts push crm %s: %v\n%s", v, err, out)
		}
		lock, err := chartrepo.ReadLock(filepath.Join(dir, chartrepo.LockFile))
		if err != nil {
			return err
		}
		p, ok := lock.Find("eva-crm", v)
		if !ok {
			return fmt.Errorf("evactl charts push did not record eva-crm %s", v)
		}
		crmPublished = append(crmPublished, p)
	}
	return nil
}

// teamCharts is the charts folder of a team that pushed the two crm versions: the
// suite's, its lock listing them too, so chart verification finds them.
func teamCharts(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "charts")
	if err := os.CopyFS(dir, os.DirFS(chartsDir)); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, chartrepo.LockFile)
	lock, err := chartrepo.ReadLock(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range crmPublished {
		lock.Add("eva-crm", p)
	}
	if err := lock.Write(file); err != nil {
		t.Fatal(err)
	}
	return dir
}

// createRollout creates a release bringing crm at version to the tenants of ns.
func createRollout(t *testing.T, ns, name, version, readyTimeout string, waves ...map[string]any) {
	t.Helper()
	list := make([]any, len(waves))
	for i, w := range waves {
		list[i] = w
	}
	spec := map[string]any{"versions": map[string]any{"crm": version}, "waves": list}
	if readyTimeout != "" {
		spec["gates"] = map[string]any{"readyTimeout": readyTimeout}
	}
	ro := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eva.aidonow.com/v1alpha1", "kind": "EvaRollout",
		"metadata": map[string]any{"namespace": ns, "name": name}, "spec": spec,
	}}
	if err := cluster.Client.Create(context.Background(), ro); err != nil {
		t.Fatal(err)
	}
	// Rollouts are ordered by creation time, to the second: the next one must be newer.
	time.Sleep(1100 * time.Millisecond)
}

func rolloutStatus(t *testing.T, ns, name string) evav1.EvaRolloutStatus {
	t.Helper()
	ro := &unstructured.Unstructured{}
	ro.SetAPIVersion("eva.aidonow.com/v1alpha1")
	ro.SetKind("EvaRollout")
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, ro); err != nil {
		t.Fatal(err)
	}
	var st evav1.EvaRolloutStatus
	raw, _, _ := unstructured.NestedMap(ro.Object, "status")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func waitRollout(t *testing.T, ns, name string, timeout time.Duration, phase evav1.RolloutPhase) evav1.EvaRolloutStatus {
	t.Helper()
	var st evav1.EvaRolloutStatus
	poll(t, fmt.Sprintf("rollout %s %s", name, phase), timeout, func() error {
		st = rolloutStatus(t, ns, name)
		if st.Phase != phase {
			return fmt.Errorf("%s: %s", st.Phase, st.Message)
		}
		return nil
	})
	return st
}

// releaseChartVersion is the chart version a HelmRelease asks for (as
// render.ReleaseChartVersion reads it).
func releaseChartVersion(hr *unstructured.Unstructured) string {
	var typed helmv2.HelmRelease
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(hr.Object, &typed); err != nil {
		return ""
	}
	return render.ReleaseChartVersion(&typed)
}

// crmVersions reads the chart version of each tenant's crm HelmRelease.
func crmVersions(t *testing.T, waveOf map[string]int) map[string]string {
	t.Helper()
	out := map[string]string{}
	for code, hr := range crmReleases(t, waveOf) {
		out[code] = releaseChartVersion(hr)
	}
	return out
}

// crmResourceVersions reads each tenant's crm HelmRelease: chart version, generation
// and resourceVersion, which moves with any write. The frozen tenant's resourceVersion
// is left out: helm-controller notes its suspension in the status when it gets to it,
// half a minute later on a loaded machine; its generation still shows any spec change.
func crmResourceVersions(t *testing.T, waveOf map[string]int) map[string]string {
	t.Helper()
	out := map[string]string{}
	for code, hr := range crmReleases(t, waveOf) {
		v := releaseChartVersion(hr)
		out[code] = fmt.Sprintf("%s (generation %d", v, hr.GetGeneration())
		if code != "ROLLCC" {
			out[code] += ", resourceVersion " + hr.GetResourceVersion()
		}
		out[code] += ")"
	}
	return out
}

func crmReleases(t *testing.T, waveOf map[string]int) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for code := range waveOf {
		hr := &unstructured.Unstructured{}
		hr.SetGroupVersionKind(helmReleaseGVK)
		if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: tenant.Namespace(code), Name: "crm"}, hr); err != nil {
			t.Fatal(err)
		}
		out[code] = hr
	}
	return out
}

// writersOf names who wrote an object, from its managed fields: manager, operation,
// subresource and time.
func writersOf(u *unstructured.Unstructured) string {
	var out []string
	for _, m := range u.GetManagedFields() {
		at := ""
		if m.Time != nil {
			at = m.Time.UTC().Format(time.RFC3339)
		}
		out = append(out, fmt.Sprintf("%s %s %s %s", m.Manager, m.Operation, m.Subresource, at))
	}
	return strings.Join(out, "; ")
}

// releaseHistory is every change of the tenants' crm HelmReleases, in the order one
// watch delivered them (the API server's order).
type releaseHistory struct {
	stop   func()
	done   chan struct{}
	mu     sync.Mutex
	events []releaseEvent
}

type releaseEvent struct {
	code    string
	version string // spec.chart.spec.version
	ready   bool   // Ready True for this generation, on version
}

func watchReleases(t *testing.T, waveOf map[string]int) *releaseHistory {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(helmReleaseGVK.GroupVersion().WithKind("HelmReleaseList"))
	w := watchObjects(t, list, client.MatchingFields{"metadata.name": "crm"})
	h := &releaseHistory{stop: w.Stop, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for ev := range w.ResultChan() {
			hr, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || ev.Type == watch.Deleted || ev.Type == watch.Error {
				continue
			}
			code := hr.GetLabels()[tenant.LabelCapsule]
			if _, ours := waveOf[code]; !ours {
				continue
			}
			v := releaseChartVersion(hr)
			observed, _, _ := unstructured.NestedInt64(hr.Object, "status", "observedGeneration")
			attempted, _, _ := unstructured.NestedString(hr.Object, "status", "lastAttemptedRevision")
			ready := conditionOf(hr, "Ready").Status == string(metav1.ConditionTrue) && observed == hr.GetGeneration() &&
				status.SameChartVersion(attempted, v, "")
			h.mu.Lock()
			h.events = append(h.events, releaseEvent{code: code, version: v, ready: ready})
			h.mu.Unlock()
		}
	}()
	return h
}

// watchObjects starts a watch of the objects of a list's kind, stopped when the test ends.
func watchObjects(t *testing.T, list *unstructured.UnstructuredList, opts ...client.ListOption) watch.Interface {
	t.Helper()
	watcher, err := client.NewWithWatch(cluster.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := watcher.Watch(ctx, list, opts...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(); cancel() })
	return w
}

// check replays the history of the fixed release: a tenant is updating from the first
// event carrying 1.5.0 until the first one Ready on it. No wave-3 release may carry
// 1.5.0 before every wave-2 tenant was Ready on it (nor wave 2 before wave 1), and never
// two tenants update at once: waves 1 and 2 by maxUpdate 1, wave 3 by helm-controller's
// capacity.
func (h *releaseHistory) check(t *testing.T, waveOf map[string]int) {
	t.Helper()
	h.stop()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	started, readyOn := map[string]int{}, map[string]int{}
	for i, e := range h.events {
		if e.version != crmFixed {
			continue
		}
		if _, ok := started[e.code]; !ok {
			started[e.code] = i
			updating := []string{}
			for code, s := range started {
				if _, r := readyOn[code]; !r && waveOf[code] == waveOf[e.code] && s <= i {
					updating = append(updating, code)
				}
			}
			if len(updating) > 1 {
				t.Errorf("event %d: %d tenants of wave %d updating at once (maxUpdate 1, or one release in flight): %v", i, len(updating), waveOf[e.code], updating)
			}
		}
		if _, ok := readyOn[e.code]; !ok && e.ready {
			readyOn[e.code] = i
		}
	}
	for code, w := range waveOf {
		if code == "ROLLCC" {
			if _, moved := started[code]; moved {
				t.Errorf("the frozen tenant %s got crm %s", code, crmFixed)
			}
			continue
		}
		s, ok := started[code]
		if !ok {
			t.Errorf("%s never got crm %s in %d events", code, crmFixed, len(h.events))
			continue
		}
		for earlier, ew := range waveOf {
			if ew != w-1 {
				continue
			}
			if r, ok := readyOn[earlier]; !ok || r > s {
				t.Errorf("%s (wave %d) got crm %s at event %d, before %s (wave %d) was Ready on it (event %d, seen %v)",
					code, w, crmFixed, s, earlier, ew, r, ok)
			}
		}
	}
	t.Logf("%d HelmRelease events checked", len(h.events))
}
