package controller

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/testenv"
)

// asOperator is a client acting as the operator's service account, with the groups the
// API server gives a service account: what `kubectl --as` does.
func asOperator(t *testing.T) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: testenv.OperatorServiceAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:eva-system", "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func restrictedNamespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
}

func seedJob(ns string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evil"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "x", Image: "busybox"}},
		}}}}
}

func deployerBinding(ns, role string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "grab-" + role},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "eva-deployer", Namespace: ns}}}
}

// TestOperatorIdentityIsFenced makes requests as the operator's service account, with
// the RBAC and admission policy of base/ installed: outside eva-tenant-* namespaces, and
// for writes that would escalate inside them, the API server refuses; the writes the
// operator needs for a tenant go through.
func TestOperatorIdentityIsFenced(t *testing.T) {
	applyOperatorBase(t)
	ctx := context.Background()
	op := asOperator(t)
	const tenantNS = "eva-tenant-fenced"
	if err := k8s.Create(ctx, restrictedNamespace(tenantNS)); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	privilegedNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "eva-tenant-privil",
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}}}
	jobAsDeployer := seedJob(tenantNS)
	jobAsDeployer.Spec.Template.Spec.ServiceAccountName = "eva-deployer"

	denied := map[string]func() error{
		"create a Job in kube-system": func() error { return op.Create(ctx, seedJob("kube-system")) },
		"create a ServiceAccount in kube-system": func() error {
			return op.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "evil"}})
		},
		"create a RoleBinding in kube-system": func() error { return op.Create(ctx, deployerBinding("kube-system", "eva-tenant-deployer")) },
		"delete the kube-system namespace": func() error {
			return op.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}})
		},
		"delete the default namespace":                     func() error { return op.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}) },
		"create a namespace outside eva-tenant-*":          func() error { return op.Create(ctx, restrictedNamespace("team-x")) },
		"bind ClusterRole admin in a tenant namespace":     func() error { return op.Create(ctx, deployerBinding(tenantNS, "admin")) },
		"bind cluster-admin in a tenant namespace":         func() error { return op.Create(ctx, deployerBinding(tenantNS, "cluster-admin")) },
		"create a tenant namespace without restricted PSA": func() error { return op.Create(ctx, privilegedNS) },
		"create a HelmRelease running as helm-controller":  func() error { return op.Create(ctx, unboundRelease(tenantNS)) },
		"create a Job running as the deployer account":     func() error { return op.Create(ctx, jobAsDeployer) },
		"create a ClusterRoleBinding": func() error {
			return op.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "grab"},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "eva-operator", Namespace: "eva-system"}}})
		},
		"read a Secret": func() error {
			return op.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "anything"}, &corev1.Secret{})
		},
		"create a Secret not named for the tenant": func() error {
			return op.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "sh.helm.release.v1.crm.v1"}})
		},
		"create a service account token Secret": func() error {
			return op.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "fenced-token",
				Annotations: map[string]string{"kubernetes.io/service-account.name": "default"}}, Type: corev1.SecretTypeServiceAccountToken})
		},
		"create a Secret outside tenant namespaces": func() error {
			return op.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-x"}})
		},
		"read a tenant's Secret back": func() error {
			return op.Get(ctx, client.ObjectKey{Namespace: tenantNS, Name: "fenced-db"}, &corev1.Secret{})
		},
		// It reads a tenant's decryption key by its name, never lists what else its
		// namespace holds, and reads no key of Flux's.
		"list the Secrets of its own namespace": func() error {
			return op.List(ctx, &corev1.SecretList{}, client.InNamespace("eva-system"))
		},
		"create a Secret in its own namespace that is no account key": func() error {
			return op.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "eva-system", Name: "eva-nats-operator-signer"}})
		},
		"create an account key Secret that is not Opaque": func() error {
			return op.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "eva-system", Name: "eva-nats-account-tlsish"},
				Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": nil, "tls.key": nil}})
		},
		"create a Secret in its own namespace named past the consumer's credentials": func() error {
			return op.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "eva-system", Name: "eva-nats-consumer-x"}})
		},
		"read a decryption key of Flux's": func() error {
			return op.Get(ctx, client.ObjectKey{Namespace: "flux-system", Name: "sops-age-acmeco"}, &corev1.Secret{})
		},
	}
	for what, do := range denied {
		t.Run("denied: "+what, func(t *testing.T) {
			err := do()
			if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
				t.Fatalf("want the API server to refuse, got %v", err)
			}
		})
	}

	allowed := map[string]func() error{
		"create a ServiceAccount in a tenant namespace": func() error {
			return op.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "eva-deployer"}})
		},
		"bind eva-tenant-deployer in a tenant namespace": func() error { return op.Create(ctx, deployerBinding(tenantNS, "eva-tenant-deployer")) },
		"create the seed Job in a tenant namespace":      func() error { return op.Create(ctx, seedJob(tenantNS)) },
		"create a restricted tenant namespace":           func() error { return op.Create(ctx, restrictedNamespace("eva-tenant-allowd")) },
		"create the tenant's own Secret": func() error {
			return op.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "fenced-db"}, StringData: map[string]string{"password": "x"}})
		},
		"delete a tenant namespace": func() error {
			return op.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "eva-tenant-allowd"}})
		},
		"keep a tenant's NATS account key in its own namespace": func() error {
			return op.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "eva-system", Name: "eva-nats-account-fenced"},
				Type: corev1.SecretTypeOpaque}, client.DryRunAll)
		},
		"write a tenant's NATS credentials": func() error {
			return op.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "fenced-nats"},
				Type: corev1.SecretTypeOpaque}, client.DryRunAll)
		},
		"write the platform consumer's NATS credentials": func() error {
			return op.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "eva-system", Name: ConsumerCredsSecret},
				Type: corev1.SecretTypeOpaque}, client.DryRunAll)
		},
	}
	for _, what := range []string{"create a ServiceAccount in a tenant namespace", "bind eva-tenant-deployer in a tenant namespace",
		"create the seed Job in a tenant namespace", "create a restricted tenant namespace", "delete a tenant namespace",
		"create the tenant's own Secret", "keep a tenant's NATS account key in its own namespace", "write a tenant's NATS credentials",
		"write the platform consumer's NATS credentials"} {
		t.Run("allowed: "+what, func(t *testing.T) {
			if err := allowed[what](); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestMetricsNeedAuthorization scrapes the operator binary's /metrics: HTTPS only, 401
// without a token, 403 for an account without the metrics-reader role, 200 for one
// bound to it.
func TestMetricsNeedAuthorization(t *testing.T) {
	applyOperatorBase(t)
	ctx := context.Background()
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	startOperatorProcess(t, "", "--metrics-bind-address="+addr)
	testenv.WaitListening(t, addr, 30*time.Second)

	cs := kubernetes.NewForConfigOrDie(env.Config)
	token := func(name string) string {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: claimsNamespace, Name: name}}
		if err := k8s.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(claimsNamespace).CreateToken(ctx, name,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	reader := token("metrics-scraper")
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "eva-test-metrics-scraper"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "eva-operator-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "metrics-scraper", Namespace: claimsNamespace}}}
	if err := k8s.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	stranger := token("not-a-scraper")

	// The certificate is the operator's own, self-signed: trusted here on purpose.
	httpc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	scrape := func(scheme, bearer string) (int, string, error) {
		req, _ := http.NewRequest(http.MethodGet, scheme+"://"+addr+"/metrics", nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	if code, _, err := scrape("http", ""); err == nil && code == http.StatusOK {
		t.Error("metrics answered over plain HTTP")
	}
	cases := []struct {
		name, token string
		want        int
	}{{"no token", "", http.StatusUnauthorized}, {"not authorized", stranger, http.StatusForbidden}, {"metrics reader", reader, http.StatusOK}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// RBAC reaches the authorizer's cache a moment after the binding is created.
			eventually(t, waitFor, "scrape answer", func() error {
				code, body, err := scrape("https", c.token)
				if err != nil {
					return err
				}
				if code != c.want {
					return fmt.Errorf("status %d, want %d", code, c.want)
				}
				if c.want == http.StatusOK && !strings.Contains(body, "eva_render_seconds") {
					return fmt.Errorf("no Eva metrics in the answer")
				}
				return nil
			})
		})
	}
}

// TestTenantApplierIsFenced makes requests as a tenant's GitOps identity (the account
// its Flux Kustomization impersonates, base/rbac/tenant_applier.yaml): it writes its own
// namespace's objects, and the API server refuses it another tenant's namespace, any
// other namespace, and the escalations the operator is refused too.
func TestTenantApplierIsFenced(t *testing.T) {
	applyOperatorBase(t)
	applyDeliveryFile(t, "APPLYA")
	ctx := context.Background()
	cfg := rest.CopyConfig(env.Config)
	// What kustomize-controller sends for serviceAccountName eva-tenant-applya; the API
	// server adds the service-account groups.
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:flux-system:eva-tenant-applya"}
	applier, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	other := "eva-tenant-applyb"
	if err := k8s.Create(ctx, restrictedNamespace(other)); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := applier.Create(ctx, restrictedNamespace("eva-tenant-applya")); err != nil {
		t.Fatalf("a tenant's applier cannot create its own namespace: %v", err)
	}
	sa := func(ns string) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eva-deployer"}}
	}
	if err := applier.Create(ctx, sa("eva-tenant-applya")); err != nil {
		t.Fatalf("a tenant's applier cannot write in its own namespace: %v", err)
	}
	toDeployer := deployerBinding("eva-tenant-applya", "eva-tenant-deployer")
	toDeployer.Subjects = []rbacv1.Subject{{Kind: "ServiceAccount", Name: "eva-deployer", Namespace: "eva-tenant-applya"}}
	if err := applier.Create(ctx, toDeployer); err != nil {
		t.Fatalf("a tenant's applier cannot bind its deployer: %v", err)
	}
	// A tenant with encrypted Secrets: its foundation grants its own applier the Secrets
	// of its own namespace, and the decrypted Secret can then be applied there.
	secretsFor := func(ns, subject string) *rbacv1.RoleBinding {
		b := deployerBinding(ns, "eva-tenant-secrets")
		b.Subjects = []rbacv1.Subject{{Kind: "ServiceAccount", Name: subject, Namespace: "flux-system"}}
		return b
	}
	secret := func(ns string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "applya-db"}, StringData: map[string]string{"password": "x"}}
	}
	if err := applier.Get(ctx, client.ObjectKey{Namespace: "eva-tenant-applya", Name: "x"}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Fatalf("a tenant's applier reads Secrets before its foundation granted them: %v", err)
	}
	if err := applier.Create(ctx, secretsFor("eva-tenant-applya", "eva-tenant-applya")); err != nil {
		t.Fatalf("a tenant's applier cannot grant itself its own namespace's Secrets: %v", err)
	}
	eventually(t, 10*time.Second, "the applier to write its own namespace's Secret", func() error { return applier.Create(ctx, secret("eva-tenant-applya")) })
	denied := map[string]func() error{
		"write in another tenant's namespace":     func() error { return applier.Create(ctx, sa(other)) },
		"create another tenant's namespace":       func() error { return applier.Create(ctx, restrictedNamespace("eva-tenant-applyc")) },
		"delete another tenant's namespace":       func() error { return applier.Delete(ctx, restrictedNamespace(other)) },
		"write in kube-system":                    func() error { return applier.Create(ctx, seedJob("kube-system")) },
		"bind admin in its own namespace":         func() error { return applier.Create(ctx, deployerBinding("eva-tenant-applya", "admin")) },
		"create a HelmRelease as helm-controller": func() error { return applier.Create(ctx, unboundRelease("eva-tenant-applya")) },
		"read a Secret of another tenant": func() error {
			return applier.Get(ctx, client.ObjectKey{Namespace: other, Name: "x"}, &corev1.Secret{})
		},
		"write a Secret of another tenant": func() error { return applier.Create(ctx, secret(other)) },
		"grant Secrets to another account": func() error {
			return applier.Create(ctx, secretsFor("eva-tenant-applya", "eva-tenant-applyb"))
		},
	}
	for what, do := range denied {
		t.Run("denied: "+what, func(t *testing.T) {
			if err := do(); !apierrors.IsForbidden(err) {
				t.Fatalf("want the API server to refuse, got %v", err)
			}
		})
	}
}

func unboundRelease(ns string) *helmv2.HelmRelease {
	return &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crm"},
		Spec: helmv2.HelmReleaseSpec{Chart: &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: "eva-crm",
			SourceRef: helmv2.CrossNamespaceObjectReference{Kind: "HelmRepository", Name: "eva-charts", Namespace: "flux-system"}}}}}
}
