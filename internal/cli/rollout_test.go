package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/testenv"
)

func TestRolloutStatusReadsTheCluster(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kubeconfig, err := env.KubeConfigFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := evav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenants"}}); err != nil {
		t.Fatal(err)
	}
	ro := &evav1.EvaRollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenants", Name: "crm-1-5"},
		Spec: evav1.EvaRolloutSpec{Versions: map[string]evav1.ModuleVersion{"crm": "1.5.0"},
			Waves: []evav1.RolloutWave{{Wave: 1}, {Wave: 2}}},
	}
	if err := c.Create(ctx, ro); err != nil {
		t.Fatal(err)
	}
	// A release's versions and waves are what its admissions were made for.
	changed := ro.DeepCopy()
	changed.Spec.Versions["crm"] = "1.6.0"
	if err := c.Update(ctx, changed); err == nil || !strings.Contains(err.Error(), "versions cannot change once released") {
		t.Errorf("changing a rollout's versions: %v", err)
	}
	changed = ro.DeepCopy()
	changed.Spec.Waves = changed.Spec.Waves[:1]
	if err := c.Update(ctx, changed); err == nil || !strings.Contains(err.Error(), "the waves cannot be added, removed or reordered") {
		t.Errorf("removing a rollout's wave: %v", err)
	}
	paused := ro.DeepCopy()
	paused.Spec.Paused = true
	if err := c.Update(ctx, paused); err != nil {
		t.Errorf("pausing a rollout: %v", err)
	}
	ro = paused
	done := metav1.NewTime(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	ro.Status = evav1.EvaRolloutStatus{Phase: evav1.RolloutHalted, CurrentWave: 2, Updated: 4, Total: 6,
		Message: "halted in wave 2: ACMECO Failed: crm: \x1b[31mInstallFailed",
		Waves: []evav1.WaveStatus{
			{Wave: 1, Total: 2, CompletedAt: &done, Updated: []evav1.RolloutTenant{{Code: "AAAAAA", Name: "a"}, {Code: "BBBBBB", Name: "b"}}},
			{Wave: 2, Total: 4, Updated: []evav1.RolloutTenant{{Code: "ACMECO", Name: "acmeco"}, {Code: "CCCCCC", Name: "c"}},
				Skipped: []evav1.RolloutTenant{{Code: "FROZEN", Name: "frozen", Reason: "frozen: audit"}}},
		}}
	if err := c.Status().Update(ctx, ro); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI(t, "rollout", "status", "-n", "tenants", "--kubeconfig", kubeconfig)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"crm-1-5  Halted  wave 2  4/6 tenants  crm 1.5.0",
		`halted in wave 2: ACMECO Failed: crm: \x1b[31mInstallFailed`,
		"wave 1  [####################] 2/2  complete 2026-11-24T10:00:00Z",
		"wave 2  [#############-------] 2/3",
		"skipped FROZEN: frozen: audit",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Error("a tenant's message reached the terminal unescaped")
	}
	if code, _, errOut := runCLI(t, "rollout", "status", "nope", "-n", "tenants", "--kubeconfig", kubeconfig); code != ExitInvalid ||
		!strings.Contains(errOut, "no EvaRollout nope in tenants") {
		t.Errorf("unknown rollout: exit %d, %q", code, errOut)
	}

	// As kubectl: $KUBECONFIG and --context name the cluster, -o yaml prints the objects.
	two, real := twoContexts(t, kubeconfig)
	t.Setenv("KUBECONFIG", two)
	if code, _, errOut := runCLI(t, "rollout", "status", "-n", "tenants"); code == ExitOK {
		t.Errorf("the current context (a server that is not there) was not the one read: %s", errOut)
	}
	code, out, errOut = runCLI(t, "rollout", "status", "-n", "tenants", "--context", real, "-o", "yaml")
	if code != ExitOK || !strings.Contains(out, "name: crm-1-5") || !strings.Contains(out, "phase: Halted") {
		t.Errorf("status --context %s -o yaml from $KUBECONFIG: exit %d\n%s%s", real, code, out, errOut)
	}
}

// twoContexts writes a copy of kubeconfig with a second context, current, whose server
// is not there; it returns the copy and the name of the working context.
func twoContexts(t *testing.T, kubeconfig string) (string, string) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	real := cfg.CurrentContext
	cfg.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	ctx := *cfg.Contexts[real]
	ctx.Cluster = "nowhere"
	cfg.Contexts["nowhere"] = &ctx
	cfg.CurrentContext = "nowhere"
	file := filepath.Join(t.TempDir(), "two-contexts")
	if err := clientcmd.WriteToFile(*cfg, file); err != nil {
		t.Fatal(err)
	}
	return file, real
}
