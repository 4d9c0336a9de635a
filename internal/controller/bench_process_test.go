package controller

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/metrics"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/shard"
	"github.com/aidonow/eva/internal/testenv"
)

// operatorFleets counts the fleets BenchmarkOperatorProcess has created in this test
// process, for codes no earlier fleet claimed.
var operatorFleets int

// BenchmarkOperatorProcess runs the eva-operator binary as deployed: its own process,
// pure-cluster mode, dev environment, --concurrency=8, against the envtest API server,
// with the stand-in (in the benchmark's process) playing helm-controller and the other
// controllers. It applies 1,000 tenants of the fleet mix at once and reports the time
// until all are Active and the peak resident memory (VmHWM) of each operator process:
// shards-1 is one process holding the whole fleet, shards-2 splits the same fleet
// between two processes started with --shard (half the tenants labelled for each), which
// shows what memory one shard costs per tenant it holds. shards-1-memlimit-128Mi is one
// process run as the chart deploys it with a 128Mi memory limit (the container's limit
// in CONTAINER_MEMORY_LIMIT, from which the operator sets Go's soft memory limit): what a
// limit costs in time, and what peak it holds the process to.
// It also reports the CPU time per tenant of the operator processes (from start-up to
// all Active), of the API server and etcd, and of this process (the stand-in); and, from
// the operators' own /metrics, their API requests, writes (POST, PUT, PATCH, DELETE)
// and reconciles per tenant, beside the objects of a tenant's bundle (the goal: writes
// at most the bundle's objects and 4). Writes are counted without the Events the
// operator records (life events, one per step), which are reported apart, from the API
// server's count of writes to events (nothing else here records any).
//
// EVA_BENCH_FLEETS lists more fleet sizes (such as 10000): each runs shards-1 once more,
// named fleet-N, for the peak memory at that size; N@LIMIT (10000@600Mi) runs it as the
// chart deploys it with that memory limit (fleet-N-memlimit-LIMIT). A fleet comes
// in waves of at most a thousand tenants, each Active before the next is created. Every
// run also reports what the control plane holds resident at its end
// (apiserver-etcd-RSS-MiB).
func BenchmarkOperatorProcess(b *testing.B) {
	startStandIn(b)
	kubeconfig, err := env.KubeConfigFile(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	runs := []operatorRun{{fleet: 1000, shards: 1}, {fleet: 1000, shards: 2}, {fleet: 1000, shards: 1, memLimit: "128Mi"}}
	for field := range strings.FieldsFuncSeq(os.Getenv("EVA_BENCH_FLEETS"), func(r rune) bool { return r == ',' || r == ' ' }) {
		size, limit, _ := strings.Cut(field, "@")
		n, err := strconv.Atoi(size)
		if err != nil || n < 1 {
			b.Fatalf("EVA_BENCH_FLEETS=%q: %q is not a fleet size", os.Getenv("EVA_BENCH_FLEETS"), field)
		}
		runs = append(runs, operatorRun{fleet: n, shards: 1, memLimit: limit})
	}
	for i, run := range runs {
		b.Run(run.name(), func(b *testing.B) {
			for b.Loop() {
				// Codes of their own per sub-benchmark and per run (-count runs them again in
				// the same API server): a purged tenant's claim stays, and refuses its code.
				prefix := fmt.Sprintf("%c%c", 'O'+i, 'A'+operatorFleets%26)
				operatorFleets++
				run.measure(b, kubeconfig, prefix)
			}
		})
	}
}

// fleetWave is the most tenants BenchmarkOperatorProcess creates at once, and
// waveLabel the label on a tenant that says in which wave it came.
const (
	fleetWave = 1000
	waveLabel = "bench.eva.aidonow.com/wave"
)

// operatorRun is one of BenchmarkOperatorProcess's runs: fleet tenants held by shards
// operator processes, each in a container whose memory limit is memLimit when set.
type operatorRun struct {
	fleet, shards int
	memLimit      string
}

func (r operatorRun) name() string {
	name := fmt.Sprintf("shards-%d", r.shards)
	if r.memLimit != "" {
		name += "-memlimit-" + r.memLimit
	}
	if r.fleet != 1000 {
		name = fmt.Sprintf("fleet-%d", r.fleet)
		if r.memLimit != "" {
			name += "-memlimit-" + r.memLimit
		}
	}
	return name
}

// measure starts the operators, applies the fleet, waits until it is all Active and
// reports what it cost.
func (r operatorRun) measure(b *testing.B, kubeconfig, prefix string) {
	environ := []string{"POD_NAMESPACE=" + claimsNamespace}
	if r.memLimit != "" {
		// The container's limit, and not this process's GOMEMLIMIT (which would decide).
		environ = append(environ, "CONTAINER_MEMORY_LIMIT="+r.memLimit, "GOMEMLIMIT=")
	}
	overlays := filepath.Join(testenv.RepoRoot(), "overlays")
	ensureFenceParams(b, overlays, "dev")
	ns := newTestNamespace(b)
	b.Cleanup(func() { removeFleet(b, ns) }) // before the tenants are purged
	var procs []*testenv.Process
	var metricsAddrs, pprofAddrs []string
	for s := range r.shards {
		addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(b))
		args := []string{"--overlays=" + overlays, "--env=dev", "--concurrency=8", "--tenant-namespaces=" + ns,
			"--claims-namespace=" + claimsNamespace, "--metrics-bind-address=" + addr, "--metrics-secure=false",
			"--health-probe-bind-address=0"}
		pprofAddrs = append(pprofAddrs, fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(b)))
		args = append(args, "--profiler-bind-address="+pprofAddrs[s])
		if r.shards > 1 {
			args = append(args, fmt.Sprintf("--shard=%s=bench-%d", shard.Label, s))
		}
		procs = append(procs, testenv.StartOperator(b, kubeconfig, environ, args...))
		metricsAddrs = append(metricsAddrs, addr)
	}
	heapBefore := liveHeap(b, pprofAddrs)
	cost := startCPUCost(b)
	eventsBefore, watchBefore, readsBefore := eventWrites(b), watchEvents(b), apiReads(b)
	start := time.Now()
	var profiled []string
	if os.Getenv("EVA_BENCH_OPERATOR_PROFILES") != "" {
		profiled = pprofAddrs
	}
	profiles := profileOperators(b, profiled, r.name())
	// A fleet past a thousand tenants comes in waves of a thousand, each Active before
	// the next: what it measures is the operator holding the fleet, and one
	// API server on two cores does not provision ten thousand tenants at once in a
	// useful time (the API server, not the operator, is what they would wait for).
	for from := 0; from < r.fleet; from += fleetWave {
		to := min(r.fleet, from+fleetWave)
		wave := fmt.Sprint(from / fleetWave)
		createFleet(b, ns, prefix, from, to, func(i int) []tenantOpt {
			return []tenantOpt{func(t *evav1.EvaTenant) {
				t.Labels = map[string]string{waveLabel: wave}
				if r.shards > 1 {
					t.Labels[shard.Label] = fmt.Sprintf("bench-%d", i%r.shards)
				}
			}}
		})
		waitAllActive(b, ns, to-from, client.MatchingLabels{waveLabel: wave})
	}
	b.ReportMetric(time.Since(start).Seconds(), "s-to-all-Active")
	b.ReportMetric(float64(liveHeap(b, pprofAddrs)-heapBefore)/1000/float64(r.fleet), "live-heap-kB/tenant")
	profiles()
	cost.report(b, r.fleet)
	total := operatorMetrics{writesBy: map[string]float64{}}
	for _, addr := range metricsAddrs {
		m := scrapeOperator(b, addr)
		total.requests += m.requests
		total.writes += m.writes
		total.reconciles += m.reconciles
		for k, v := range m.writesBy {
			total.writesBy[k] += v
		}
	}
	perTenant := func(n float64) float64 { return n / float64(r.fleet) }
	// Where the writes went, per tenant, most first: what to look at when writes pass
	// the bundle's objects.
	var by []string
	for _, k := range slices.SortedFunc(maps.Keys(total.writesBy), func(a, b string) int { return cmp.Compare(total.writesBy[b], total.writesBy[a]) }) {
		by = append(by, fmt.Sprintf("%s %.2f", k, perTenant(total.writesBy[k])))
	}
	b.Logf("writes per tenant by verb and resource: %s", strings.Join(by, "; "))
	logWatchEvents(b, watchBefore, r.fleet)
	logReads(b, readsBefore, r.fleet)
	objects, events := bundleObjects(b, ns), eventWrites(b)-eventsBefore
	b.ReportMetric(perTenant(total.requests), "requests/tenant")
	b.ReportMetric(perTenant(total.writes-events), "writes/tenant")
	b.ReportMetric(perTenant(events), "event-writes/tenant")
	b.ReportMetric(perTenant(objects), "bundle-objects/tenant")
	b.ReportMetric(perTenant(total.writes-events-objects), "writes-over-bundle/tenant")
	b.ReportMetric(perTenant(total.reconciles), "reconciles/tenant")
	var maxRSS, maxFile int64
	var operatorCPU time.Duration
	for i, p := range procs {
		// EVA_BENCH_OPERATOR_LOGS names a folder to keep each operator's output in.
		if dir := os.Getenv("EVA_BENCH_OPERATOR_LOGS"); dir != "" {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.log", r.name(), i)), []byte(p.Output()), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		cpu, err := p.CPUTime()
		if err != nil {
			b.Fatal(err)
		}
		operatorCPU += cpu
		rss, err := p.PeakRSS()
		if err != nil {
			b.Fatal(err)
		}
		file, err := p.FileRSS()
		if err != nil {
			b.Fatal(err)
		}
		maxRSS, maxFile = max(maxRSS, rss), max(maxFile, file)
		p.Kill()
	}
	cpRSS, err := testenv.ControlPlaneRSS()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(cpRSS)/(1<<20), "apiserver-etcd-RSS-MiB")
	b.ReportMetric(float64(operatorCPU.Microseconds())/1000/float64(r.fleet), "operator-cpu-ms/tenant")
	b.ReportMetric(float64(maxRSS)/(1<<20), "peak-RSS-MiB/process")
	b.ReportMetric(float64(maxFile)/(1<<20), "file-RSS-MiB/process")
}

// removeFleet deletes what the bundles of ns's tenants put in the cluster (their
// inventories), finalizers and all. envtest runs no garbage collector: a deleted
// namespace's objects stay, and the operator of the next run in the same API server,
// which caches every tenant's objects by the capsule label, would hold the earlier
// fleets too (a memlimit-128Mi run after shards-1 measured 58.4 kB of live heap per
// tenant, and 64.7 after shards-2, against 43.8 alone).
func removeFleet(b *testing.B, ns string) {
	ctx := context.Background()
	var list evav1.EvaTenantList
	if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
		b.Errorf("the fleet in %s stays: %v", ns, err) // a cleanup: the others still run
		return
	}
	var objects, namespaces []evav1.ObjectRef
	for _, t := range list.Items {
		for _, ref := range t.Status.Inventory {
			if ref.Kind == "Namespace" {
				namespaces = append(namespaces, ref)
			} else {
				objects = append(objects, ref)
			}
		}
	}
	// The namespaces last: once one is gone, the API server answers NotFound for what
	// is still stored in it.
	failed := deleteRefs(objects) + deleteRefs(namespaces)
	if failed > 0 {
		b.Errorf("%d objects of the fleet in %s could not be deleted", failed, ns)
	}
}

// deleteRefs deletes the objects refs name, eight at a time, and returns how many
// could not be.
func deleteRefs(refs []evav1.ObjectRef) int64 {
	ctx := context.Background()
	next := make(chan evav1.ObjectRef)
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for ref := range next {
				u := objectOf(ref)
				// The finalizers of the controllers no one plays any more (helm-controller's,
				// the orphan finalizer of a Job) would keep the object.
				err := k8s.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
				if err == nil {
					err = k8s.Delete(ctx, u, client.PropagationPolicy(metav1.DeletePropagationBackground))
				}
				if err != nil && !apierrors.IsNotFound(err) {
					failed.Add(1)
				}
			}
		})
	}
	for _, ref := range refs {
		next <- ref
	}
	close(next)
	wg.Wait()
	return failed.Load()
}

// profileOperators profiles the CPU of each operator started with a profiler address,
// in 15-second profiles until the returned function is called, written to
// EVA_BENCH_OPERATOR_PROFILES/<run>-<i>-<k>.pprof (go tool pprof merges the files it is
// given): where the operator's CPU goes while the fleet provisions. The returned
// function also writes each operator's heap and allocs profiles, <run>-<i>-heap.pprof
// and <run>-<i>-allocs.pprof.
func profileOperators(b *testing.B, addrs []string, run string) func() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := saveProfile(addr, "profile?seconds=15", fmt.Sprintf("%s-%d-%d.pprof", run, i, k)); err != nil {
					b.Logf("profile of %s: %v", addr, err)
					return
				}
			}
		})
	}
	return func() {
		close(stop)
		wg.Wait()
		// What the operators hold (heap) and what they allocated (allocs) by then.
		for i, addr := range addrs {
			for _, kind := range []string{"heap", "allocs"} {
				if err := saveProfile(addr, kind, fmt.Sprintf("%s-%d-%s.pprof", run, i, kind)); err != nil {
					b.Logf("%s profile of %s: %v", kind, addr, err)
				}
			}
		}
	}
}

// saveProfile writes the profile /debug/pprof/<kind> of the operator at addr to
// EVA_BENCH_OPERATOR_PROFILES/<file>.
func saveProfile(addr, kind, file string) error {
	resp, err := http.Get("http://" + addr + "/debug/pprof/" + kind)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(os.Getenv("EVA_BENCH_OPERATOR_PROFILES"), file), data, 0o644)
}

// liveHeap is the heap the operators at addrs (their profiler addresses) hold right
// after a garbage collection, summed: what holding the fleet costs in memory, without
// the garbage a peak RSS also counts (GOGC lets the heap grow to about twice this).
func liveHeap(b *testing.B, addrs []string) int64 {
	b.Helper()
	var total int64
	for _, addr := range addrs {
		testenv.WaitListening(b, addr, time.Minute)
		// debug=1 prints the runtime's MemStats after the profile; gc=1 collects first.
		resp, err := http.Get("http://" + addr + "/debug/pprof/heap?gc=1&debug=1")
		if err != nil {
			b.Fatal(err)
		}
		text, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		_, after, found := strings.Cut(string(text), "\n# HeapAlloc = ")
		n, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(after, "\n", 2)[0]), 10, 64)
		if !found || err != nil {
			b.Fatalf("no HeapAlloc in the heap profile of %s: %v", addr, err)
		}
		total += n
	}
	return total
}

// operatorMetrics are an operator process's counters since it started: its API
// requests, the writes among them, and the tenant controller's reconciles.
type operatorMetrics struct {
	requests, writes, reconciles float64
	// writesBy are the writes by "verb resource", from eva_api_writes_total.
	writesBy map[string]float64
}

// scrapeOperator reads an operator's counters from its /metrics at addr.
func scrapeOperator(b *testing.B, addr string) operatorMetrics {
	b.Helper()
	out, err := readOperatorMetrics(addr)
	if err != nil {
		b.Fatal(err)
	}
	if out.requests == 0 || out.reconciles == 0 {
		b.Fatalf("metrics of %s: no rest_client_requests_total or evatenant reconciles", addr)
	}
	return out
}

// readOperatorMetrics reads an operator's counters from its /metrics at addr.
func readOperatorMetrics(addr string) (operatorMetrics, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return operatorMetrics{}, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return operatorMetrics{}, fmt.Errorf("metrics of %s: %w", addr, err)
	}
	out := operatorMetrics{writesBy: map[string]float64{}}
	for _, m := range families[metrics.APIWritesName].GetMetric() {
		out.writesBy[labelOf(m, "verb")+" "+labelOf(m, "resource")] += m.GetCounter().GetValue()
	}
	for _, m := range families["rest_client_requests_total"].GetMetric() {
		out.requests += m.GetCounter().GetValue()
		switch labelOf(m, "method") {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			out.writes += m.GetCounter().GetValue()
		}
	}
	for _, m := range families["controller_runtime_reconcile_total"].GetMetric() {
		if labelOf(m, "controller") == "evatenant" {
			out.reconciles += m.GetCounter().GetValue()
		}
	}
	return out, nil
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// apiServerMetrics reads the API server's /metrics.
func apiServerMetrics(b *testing.B) map[string]*dto.MetricFamily {
	b.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatalf("the API server's metrics: %v", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		b.Fatalf("the API server's metrics: %v", err)
	}
	return families
}

// watchEvents is what the API server has sent its watchers since it started, by
// resource: the events and their bytes (as JSON, whatever encoding a watcher asked for).
func watchEvents(b *testing.B) map[string][2]float64 {
	b.Helper()
	out := map[string][2]float64{}
	for _, m := range apiServerMetrics(b)["apiserver_watch_events_sizes"].GetMetric() {
		key := labelOf(m, "resource")
		if g := labelOf(m, "group"); g != "" {
			key += "." + g
		}
		h := m.GetHistogram()
		out[key] = [2]float64{out[key][0] + float64(h.GetSampleCount()), out[key][1] + h.GetSampleSum()}
	}
	return out
}

// logWatchEvents logs the watch events sent since before (watchEvents), per tenant, by
// resource, most bytes first: to every watcher, the operator's and the stand-in's.
func logWatchEvents(b *testing.B, before map[string][2]float64, tenants int) {
	b.Helper()
	after := watchEvents(b)
	for k, v := range before {
		after[k] = [2]float64{after[k][0] - v[0], after[k][1] - v[1]}
	}
	var by []string
	for _, k := range slices.SortedFunc(maps.Keys(after), func(x, y string) int { return cmp.Compare(after[y][1], after[x][1]) }) {
		if after[k][0] > 0 {
			by = append(by, fmt.Sprintf("%s %.1f (%.1f kB)", k, after[k][0]/float64(tenants), after[k][1]/1024/float64(tenants)))
		}
	}
	b.Logf("watch events per tenant by resource, to the operator and the stand-in: %s", strings.Join(by, "; "))
}

// apiReads is the API server's count of reads (get, list) since it started, by verb
// and resource.
func apiReads(b *testing.B) map[string]float64 {
	b.Helper()
	out := map[string]float64{}
	for _, m := range apiServerMetrics(b)["apiserver_request_total"].GetMetric() {
		if verb := labelOf(m, "verb"); verb == "GET" || verb == "LIST" {
			key := verb + " " + labelOf(m, "resource")
			if sub := labelOf(m, "subresource"); sub != "" {
				key += "/" + sub
			}
			out[key] += m.GetCounter().GetValue()
		}
	}
	return out
}

// logReads logs the reads the API server answered since before (apiReads), per
// tenant, most first: the operator's, the stand-in's and the benchmark's own.
func logReads(b *testing.B, before map[string]float64, tenants int) {
	b.Helper()
	after := apiReads(b)
	for k, v := range before {
		after[k] -= v
	}
	var by []string
	for _, k := range slices.SortedFunc(maps.Keys(after), func(x, y string) int { return cmp.Compare(after[y], after[x]) }) {
		if n := after[k] / float64(tenants); n >= 0.01 {
			by = append(by, fmt.Sprintf("%s %.2f", k, n))
		}
	}
	b.Logf("reads per tenant by verb and resource, by every client: %s", strings.Join(by, "; "))
}

// eventWrites is the API server's count of writes (create, update, patch) to Events
// since it started.
func eventWrites(b *testing.B) float64 {
	b.Helper()
	families := apiServerMetrics(b)
	var n float64
	for _, m := range families["apiserver_request_total"].GetMetric() {
		switch labelOf(m, "verb") {
		case "POST", "PUT", "PATCH", "APPLY":
			if labelOf(m, "resource") == "events" {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// bundleObjects counts the objects the tenants of ns hold in their inventories: what
// their bundles put in the cluster.
func bundleObjects(b *testing.B, ns string) float64 {
	b.Helper()
	var list evav1.EvaTenantList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, t := range list.Items {
		n += len(t.Status.Inventory)
	}
	return float64(n)
}

// ensureFenceParams creates the ConfigMap the operator compares its environment with
// (FenceCheck), as the chart and each overlay install it, when it is not there yet:
// without it every tenant's Provisioned condition says the cluster refuses its Ingress.
func ensureFenceParams(b *testing.B, overlays, name string) {
	b.Helper()
	e, err := overlay.Load(overlays, name)
	if err != nil {
		b.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: claimsNamespace, Name: overlay.FenceConfigMap},
		Data: e.Settings.FenceParams()}
	if err := k8s.Create(context.Background(), cm); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
}
