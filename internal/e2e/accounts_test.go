package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/natsaccount"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// TestTenantAccountOnTheCluster: the operator binary in direct messaging mode for an
// environment with natsAccounts, against the real nats-server in operator mode with a full resolver,
// on the real cluster (real helm-controller). It is SIGKILLed as soon as it has made
// the tenant's account key, before any status says so; restarted, it finishes that very
// account: the tenant is Active with status.natsAccount the key's, and the credentials
// it wrote into the tenant's namespace reach the tenant's two streams and nothing else;
// every module Deployment helm-controller installed mounts them.
// Decommissioned, the tenant's streams and account go: its credentials are refused.
func TestTenantAccountOnTheCluster(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := tenantNamespace(t, "e2e-accounts")
	n := testenv.StartNATSOperator(t, t.TempDir())
	args := append([]string{"--messaging=direct", "--overlays=" + environment(t, map[string]any{"natsAccounts": true})},
		platformNATS(t, n, "e2e-accounts")...)
	op := startOperator(t, ns, args...)
	const code = "ACCTEA"
	tn := evaTenant(ns, code, evav1.TierStarter)
	if err := cluster.Client.Create(ctx, tn); err != nil {
		t.Fatal(err)
	}
	var key corev1.Secret
	keyName := client.ObjectKey{Namespace: operatorNamespace, Name: "eva-nats-account-" + strings.ToLower(code)}
	poll(t, "the tenant's account key made", 2*time.Minute, func() error { return cluster.Client.Get(ctx, keyName, &key) })
	op.Kill()
	t.Log("operator SIGKILLed once the account key existed")
	kp, err := nkeys.FromSeed(key.Data["seed"])
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()

	startOperator(t, ns, args...)
	kubectlWaitReady(t, 4*time.Minute, tn)
	got, err := current(ctx, tn)
	if err != nil {
		t.Fatal(err)
	}
	if account, _, _ := unstructured.NestedString(got.Object, "status", "natsAccount"); account != pub {
		t.Fatalf("status.natsAccount %q, want the account the killed operator made (%s)", account, pub)
	}
	var credsSecret corev1.Secret
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: tenant.Namespace(code), Name: tenant.NATSCredsSecret(code)}, &credsSecret); err != nil {
		t.Fatal(err)
	}
	creds := credsSecret.Data["nats.creds"]
	assertModulesMountTheCredentials(ctx, t, code)
	nc, err := connectWith(n.URL, creds)
	if err != nil {
		t.Fatalf("the tenant's workload credentials: %v", err)
	}
	defer nc.Close()
	js, _ := natsjs.New(nc)
	var streams []string
	for name := range js.StreamNames(ctx).Name() {
		streams = append(streams, name)
	}
	if len(streams) != 2 {
		t.Errorf("the tenant's credentials see the streams %v, want its own two", streams)
	}

	if err := cluster.Client.Delete(ctx, tn); err != nil {
		t.Fatal(err)
	}
	poll(t, code+" gone", 4*time.Minute, func() error {
		if _, err := current(ctx, tn); !apierrors.IsNotFound(err) {
			return fmt.Errorf("tenant still there: %v", err)
		}
		return nil
	})
	if err := cluster.Client.Get(ctx, keyName, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the account key after the decommission: %v", err)
	}
	if again, err := connectWith(n.URL, creds); err == nil {
		again.Close()
		t.Error("the decommissioned tenant's credentials connect")
	}
}

func connectWith(url string, creds []byte) (*nats.Conn, error) {
	user, err := natsaccount.CredsOption(creds)
	if err != nil {
		return nil, err
	}
	return nats.Connect(url, nats.MaxReconnects(0), user)
}

// assertModulesMountTheCredentials: every Deployment in the tenant's namespace (each
// module's, as helm-controller installed its chart) mounts the tenant's NATS credentials
// at /var/run/secrets/eva/nats.
func assertModulesMountTheCredentials(ctx context.Context, t *testing.T, code string) {
	ns := tenant.Namespace(code)
	t.Helper()
	var deployments appsv1.DeploymentList
	if err := cluster.Client.List(ctx, &deployments, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(deployments.Items) == 0 {
		t.Fatalf("no Deployment in %s", ns)
	}
	for _, d := range deployments.Items {
		pod := d.Spec.Template.Spec
		volume := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool {
			return v.Secret != nil && v.Secret.SecretName == tenant.NATSCredsSecret(code)
		})
		mounted := volume >= 0 && slices.ContainsFunc(pod.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == pod.Volumes[volume].Name && m.MountPath == "/var/run/secrets/eva/"+tenant.NATSMount
		})
		if !mounted {
			t.Errorf("Deployment %s mounts no %s at /var/run/secrets/eva/%s: volumes %+v", d.Name, tenant.NATSCredsSecret(code), tenant.NATSMount, pod.Volumes)
		}
	}
}

// platformNATS creates in the operator's namespace what the platform gives Eva for the
// NATS server n (its signing key and a system user, in Secrets named after prefix) and
// returns the operator's flags that name them and the server.
func platformNATS(t *testing.T, n *testenv.OperatorNATS, prefix string) []string {
	t.Helper()
	seed, _ := n.OperatorSigner.Seed()
	systemCreds, err := os.ReadFile(n.SystemCreds)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]map[string][]byte{prefix + "-signer": {"seed": seed}, prefix + "-system": {"creds": systemCreds}} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: name}, Data: data}
		if err := cluster.Client.Create(context.Background(), secret); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"--nats-url=" + n.URL, "--nats-operator-signer-secret=" + prefix + "-signer", "--nats-system-secret=" + prefix + "-system"}
}

// TestTenantAccountGitOps: the operator binary in GitOps mode with NACK, for an
// environment with natsAccounts, on the real cluster (real Flux): it publishes the
// tenant's NACK Account and Streams naming it, mints the account on the cluster's NATS
// in operator mode and writes the credentials; Flux applies the foundation, NACK (the
// stand-in, as the Account says) makes the streams in the tenant's account, and
// helm-controller installs modules that mount the credentials. Deleted while its
// credentials hold every connection the tier allows, the tenant's workloads are cut off
// the bus, NACK deletes the streams, the tenant leaves the tree and its account is
// closed: its credentials are refused.
func TestTenantAccountGitOps(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	n := cluster.AccountsNATS
	const source = "e2e-gitops-accounts"
	url := newGitRepository(t, source+".git")
	if err := bootstrapSource(ctx, "GitRepository", source, url, "main", "10m"); err != nil {
		t.Fatal(err)
	}
	ns := tenantNamespace(t, "e2e-gitops-accounts")
	settings := gitOpsSource("GitRepository", source)
	settings["natsAccounts"] = true
	startOperator(t, ns, append([]string{"--overlays=" + environment(t, settings),
		"--publish=git", "--git-url=" + url, "--git-branch=main", "--git-cache=" + t.TempDir()},
		platformNATS(t, n, source)...)...)
	const code = "ACCTGI"
	tn := evaTenant(ns, code, evav1.TierStarter)
	if err := cluster.Client.Create(ctx, tn); err != nil {
		t.Fatal(err)
	}
	kubectlWaitReady(t, 6*time.Minute, tn)
	got, err := current(ctx, tn)
	if err != nil {
		t.Fatal(err)
	}
	if account, _, _ := unstructured.NestedString(got.Object, "status", "natsAccount"); !strings.HasPrefix(account, "A") {
		t.Errorf("status.natsAccount %q: want the tenant's account", account)
	}
	var credsSecret corev1.Secret
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: tenant.Namespace(code), Name: tenant.NATSCredsSecret(code)}, &credsSecret); err != nil {
		t.Fatal(err)
	}
	creds := credsSecret.Data[tenant.NATSCredsKey]
	assertModulesMountTheCredentials(ctx, t, code)
	nc, err := connectWith(n.URL, creds)
	if err != nil {
		t.Fatalf("the tenant's workload credentials: %v", err)
	}
	defer nc.Close()
	js, _ := natsjs.New(nc)
	var streams []string
	for name := range js.StreamNames(ctx).Name() {
		streams = append(streams, name)
	}
	slices.Sort(streams)
	if want := []string{tenant.CommandsStream(code), tenant.EventsStream(code)}; !slices.Equal(streams, want) {
		t.Errorf("the tenant's account holds the streams %v, want %v (made by NACK there)", streams, want)
	}

	// Credentials taken from a pod hold every other connection the tier allows: NACK,
	// which deletes the streams with these credentials, is let in only because the
	// decommission cuts them off first.
	limit := tenant.DefaultCatalog().Tiers[evav1.TierStarter].Account.Connections
	for i := int64(1); i < limit; i++ {
		held, err := connectWith(n.URL, creds)
		if err != nil {
			t.Fatalf("connection %d of the tier's %d: %v", i+1, limit, err)
		}
		defer held.Close()
	}
	if beyond, err := connectWith(n.URL, creds); err == nil {
		beyond.Close()
		t.Fatalf("a connection beyond the tier's %d was taken", limit)
	}
	deleteAndWaitGone(t, 5*time.Minute, tn)
	poll(t, "the decommissioned tenant's credentials refused", time.Minute, func() error {
		if again, err := connectWith(n.URL, creds); err == nil {
			again.Close()
			return fmt.Errorf("they connect")
		}
		return nil
	})
}
