package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/chartrepo"
	evapublish "github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testcluster"
	"github.com/aidonow/eva/internal/testenv"
)

// poll waits until cond returns nil; on timeout it fails with the last error and what
// the cluster's components said last.
func poll(t *testing.T, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	timeout = within(t, timeout)
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(time.Second)
	}
	fatalf(t, "%s: not within %s: %v\ncomponents: %v\nkustomize-controller: %s\nhelm-controller: %s\nsource-controller: %s",
		what, timeout, err, cluster.Check(), cluster.Logs("kustomize-controller", 3000),
		cluster.Logs("helm-controller", 3000), cluster.Logs("source-controller", 2000))
}

var (
	kustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}
	helmReleaseGVK   = schema.GroupVersionKind{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease"}
)

// readyOf returns the Ready condition of a Flux object.
func readyOf(u *unstructured.Unstructured) (metav1.Condition, bool) {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, item := range raw {
		m, _ := item.(map[string]any)
		if m["type"] == "Ready" {
			return metav1.Condition{Type: "Ready", Status: metav1.ConditionStatus(fmt.Sprint(m["status"])),
				Reason: fmt.Sprint(m["reason"]), Message: fmt.Sprint(m["message"])}, true
		}
	}
	return metav1.Condition{}, false
}

// allReady checks every object of a kind (with the capsule label when label is set) is
// Ready, and that there are want of them.
func allReady(ctx context.Context, gvk schema.GroupVersionKind, want int, opts ...client.ListOption) error {
	return allReadyOn(ctx, cluster.Client, gvk, want, opts...)
}

// allReadyOn is allReady on the cluster c reaches.
func allReadyOn(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, want int, opts ...client.ListOption) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, list, opts...); err != nil {
		return err
	}
	if len(list.Items) != want {
		return fmt.Errorf("%d %ss, want %d", len(list.Items), gvk.Kind, want)
	}
	var notReady []string
	for i := range list.Items {
		u := &list.Items[i]
		if c, ok := readyOf(u); !ok || c.Status != metav1.ConditionTrue {
			notReady = append(notReady, fmt.Sprintf("%s/%s (%s: %s)", u.GetNamespace(), u.GetName(), c.Reason, c.Message))
		}
	}
	if len(notReady) > 0 {
		return fmt.Errorf("not Ready: %s", strings.Join(notReady, "; "))
	}
	return nil
}

// TestCLIPublishGitReachesRealFlux is the pull-request path: `evactl publish git` of the
// example tenants, then the real source-controller fetches the branch, the real
// kustomize-controller applies each tenant's Kustomization, the real helm-controller
// installs every module chart from the chart repository, and the module Deployments
// become Available on kwok's nodes.
//
// The examples' secret values (the Customer's database password, the Enterprise's
// certificate) are SOPS-encrypted files beside the tenant files, encrypted with the
// sops CLI: kustomize-controller decrypts them, helm-controller reads them into the
// releases, and rotating the password (a new encrypted file, published) upgrades the
// release with it. Nothing published, logged or reported holds a value in plaintext.
// ACMECO's ciphertext planted into GLOBEX's workloads past Eva does not decrypt there:
// each tenant's Kustomization holds its own key.
func TestCLIPublishGitReachesRealFlux(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	repo := gitSrv.URL + "/" + fleetRepo
	tenants, secrets := exampleTenants(t, map[string]string{"ACMECO": "ACMECO", "DEVUSR": "DEVUSR", "GLOBEX": "GLOBEX"})
	outputs := map[string]string{}
	publish := func(what string) {
		cmd := exec.Command(evactl, "publish", "git", "--repo", repo, "--branch", "main", "--env", "dev",
			"--overlays", overlays, "--charts", chartsDir, "--tenants", tenants, "--cache-dir", t.TempDir())
		cmd.Dir = testenv.RepoRoot()
		out, err := cmd.CombinedOutput()
		outputs["evactl publish git ("+what+")"] = string(out)
		if err != nil {
			t.Fatalf("evactl publish git: %v\n%s", err, out)
		}
		// The platform's Flux objects (chart source, GitOps source, root Kustomization)
		// are the suite's; ask Flux to fetch the new commit now rather than at its next
		// interval.
		requestReconcile(t, "GitRepository", "eva-tenants")
	}
	publish("the examples")
	assertExamplesDeployed(t, "eva-tenants", "ACMECO", "DEVUSR", "GLOBEX")
	assertChartsArePublished(t, "ACMECO", "DEVUSR", "GLOBEX")

	// The Customer's database password went from the encrypted file to the crm pods,
	// past Helm.
	const ns = "eva-tenant-acmeco"
	mounted := assertSecretMounted(ctx, t, "ACMECO", "crm", "crm-database", secrets[ns+"/acmeco-crm-database"], "")

	// Rotation: a new value, encrypted and published, changes the Secret and rolls the
	// crm pods.
	rotated := hostileSecret()
	encryptSecret(t, tenants, "ACMECO", "crm-database", map[string]string{"password": rotated})
	publish("the password rotated")
	assertSecretMounted(ctx, t, "ACMECO", "crm", "crm-database", map[string]string{"password": rotated}, mounted)

	// ACMECO's ciphertext, copied into GLOBEX's workloads past Eva, decrypts nowhere;
	// publishing again puts back what Eva renders.
	assertReplayDecryptsNowhere(ctx, t, repo, "ACMECO", "acmeco-crm-database", "GLOBEX")
	publish("over the planted copy")
	assertKustomizationReady(ctx, t, render.WorkloadsName("GLOBEX"))

	// The Starter tenant removed as docs/tenants.md says: its releases are uninstalled,
	// then its namespace is gone.
	assertDecommissionUninstalls(t, cluster.Client, tenants, "DEVUSR", publish)

	var values []string
	for _, data := range secrets {
		for _, v := range data {
			values = append(values, v)
		}
	}
	scanForPlaintext(t, filepath.Join(gitRoot, fleetRepo), outputs, append(values, rotated)...)
}

// assertSecretMounted waits until the tenant's module pods mount its Secret secret
// holding exactly values (byte for byte, hostile characters and all), at a revision
// other than previous (the pods rolled for a rotation; "" for the first), and returns
// that revision. What it checks is what the cluster holds: the
// Secret, the Deployment's pod template (volume, read-only mount, revision annotation),
// and Helm's own release storage, which holds the Secret's name and never a value; no
// value changed the image or the replicas (parsed as Helm --set input, it would have).
func assertSecretMounted(ctx context.Context, t *testing.T, code, module, secret string, values map[string]string, previous string) string {
	t.Helper()
	ns, name := tenant.Namespace(code), tenant.SecretName(code, secret)
	var revision string
	poll(t, "the "+module+" pods of "+code+" to mount Secret "+name, 3*time.Minute, func() error {
		var s corev1.Secret
		if err := cluster.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
			return err
		}
		if len(s.Data) != len(values) {
			return fmt.Errorf("Secret %s/%s has %d keys, want %d", ns, name, len(s.Data), len(values))
		}
		for k, v := range values {
			if string(s.Data[k]) != v {
				return fmt.Errorf("Secret %s/%s: key %s is not the encrypted file's value", ns, name, k)
			}
		}
		var d appsv1.Deployment
		if err := cluster.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: module}, &d); err != nil {
			return err
		}
		if err := mountsSecret(&d, secret, name); err != nil {
			return err
		}
		rev := d.Spec.Template.Annotations["checksum/secret-"+secret]
		if rev == "" || rev == previous {
			return fmt.Errorf("Deployment %s/%s: revision %q of the mounted Secret, want one other than %q", ns, module, rev, previous)
		}
		revision = rev
		return nil
	})
	config, _, err := releaseValues(ctx, ns, module)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := json.Marshal(config)
	for k, v := range values {
		if strings.Contains(string(stored), v) {
			t.Errorf("release %s/%s: Helm's release storage holds the value of %s", ns, module, k)
		}
	}
	if !strings.Contains(string(stored), `"secretName":"`+name+`"`) {
		t.Errorf("release %s/%s: values name no mounted Secret %s: %s", ns, module, name, stored)
	}
	return revision
}

// mountsSecret checks a Deployment's pods mount the Secret secretName read-only at
// /var/run/secrets/eva/<short>, and that no value reached the image or the replicas.
func mountsSecret(d *appsv1.Deployment, short, secretName string) error {
	pod := d.Spec.Template.Spec
	if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
		return v.Name == "secret-"+short && v.Secret != nil && v.Secret.SecretName == secretName
	}) {
		return fmt.Errorf("Deployment %s/%s has no volume of Secret %s", d.Namespace, d.Name, secretName)
	}
	for _, c := range pod.Containers {
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == "secret-"+short && m.MountPath == "/var/run/secrets/eva/"+short && m.ReadOnly
		}) {
			return fmt.Errorf("container %s of %s/%s does not mount Secret %s read-only", c.Name, d.Namespace, d.Name, secretName)
		}
		if strings.Contains(c.Image, "attacker") {
			return fmt.Errorf("container %s of %s/%s runs %s", c.Name, d.Namespace, d.Name, c.Image)
		}
	}
	if d.Spec.Replicas != nil && *d.Spec.Replicas == 20 {
		return fmt.Errorf("Deployment %s/%s has 20 replicas, as the Secret's value asked", d.Namespace, d.Name)
	}
	return nil
}

// assertChartsArePublished checks that what the real source-controller fetched and
// helm-controller installed, with both in lockdown mode, is exactly what `evactl
// charts push` published: every tenant's HelmRelease takes its chart from an
// OCIRepository of its own namespace, pinned to the manifest digest published.yaml
// records for the version; the artifact source-controller stored has that version's
// archive digest, and helm-controller installed the version with that digest appended
// (as it marks a chart from an OCIRepository).
func assertChartsArePublished(t *testing.T, codes ...string) {
	t.Helper()
	ctx := context.Background()
	lock, err := chartrepo.ReadLock(filepath.Join(chartsDir, chartrepo.LockFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range codes {
		ns := tenant.Namespace(code)
		sources := &unstructured.UnstructuredList{}
		sources.SetGroupVersionKind(schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "OCIRepositoryList"})
		if err := cluster.Client.List(ctx, sources, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		byName := map[string]map[string]any{}
		for _, src := range sources.Items {
			byName[src.GetName()] = src.Object
		}
		releases := &unstructured.UnstructuredList{}
		releases.SetGroupVersionKind(helmReleaseGVK.GroupVersion().WithKind("HelmReleaseList"))
		if err := cluster.Client.List(ctx, releases, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if len(releases.Items) == 0 || len(sources.Items) != len(releases.Items) {
			t.Fatalf("%s: %d OCIRepositories for %d HelmReleases", ns, len(sources.Items), len(releases.Items))
		}
		for _, hr := range releases.Items {
			ref, _, _ := unstructured.NestedString(hr.Object, "spec", "chartRef", "name")
			src := byName[ref]
			url, _, _ := unstructured.NestedString(src, "spec", "url")
			pinned, _, _ := unstructured.NestedString(src, "spec", "ref", "digest")
			tag, _, _ := unstructured.NestedString(src, "spec", "ref", "tag")
			archive, _, _ := unstructured.NestedString(src, "status", "artifact", "digest")
			chart := url[strings.LastIndex(url, "/")+1:]
			p, ok := lock.Find(chart, tag)
			history, _, _ := unstructured.NestedSlice(hr.Object, "status", "history")
			installed := ""
			if len(history) > 0 {
				installed, _, _ = unstructured.NestedString(history[0].(map[string]any), "chartVersion")
			}
			if !ok || pinned != p.Digest || archive != p.Archive || installed != p.Version+"+"+strings.TrimPrefix(p.Digest, "sha256:")[:12] {
				t.Errorf("%s/%s: chart %s %s pinned to %s, artifact %s, installed %s; published: %+v (%v)",
					ns, hr.GetName(), chart, tag, pinned, archive, installed, p, ok)
			}
		}
	}
}

// TestCLIPublishOCIReachesRealFlux is the same path through an OCI artifact: `evactl
// publish oci` pushes the examples (under other codes) to the registry, the platform's
// OCIRepository pulls the artifact, and Flux applies and installs it.
func TestCLIPublishOCIReachesRealFlux(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	const source = "eva-tenants-oci"
	ref := "oci://" + registry.Host() + "/eva/tenants"
	if err := bootstrapSource(ctx, "OCIRepository", source, ref, "e2e", "10s"); err != nil {
		t.Fatal(err)
	}
	tenants, secrets := exampleTenants(t, map[string]string{"ACMECO": "OCIACM", "DEVUSR": "OCIDEV", "GLOBEX": "OCIGLO"})
	publish := exec.Command(evactl, "publish", "oci", "--ref", ref+":e2e", "--insecure", "--env", "dev",
		"--overlays", environment(t, gitOpsSource("OCIRepository", source)), "--charts", chartsDir, "--tenants", tenants)
	publish.Dir = testenv.RepoRoot()
	out, err := publish.CombinedOutput()
	if err != nil {
		t.Fatalf("evactl publish oci: %v\n%s", err, out)
	}
	requestReconcile(t, "OCIRepository", source)
	assertExamplesDeployed(t, source, "OCIACM", "OCIDEV", "OCIGLO")

	// The Customer's password reached its release; the artifact holds it encrypted only.
	var values []string
	for _, data := range secrets {
		for _, v := range data {
			values = append(values, v)
		}
	}
	assertSecretMounted(ctx, t, "OCIACM", "crm", "crm-database", secrets["eva-tenant-ociacm/ociacm-crm-database"], "")
	tree, err := (&evapublish.OCI{Ref: ref + ":e2e", Insecure: true}).Pull(ctx)
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{"evactl publish oci": string(out)}
	encrypted := 0
	for path, data := range tree {
		texts["artifact file "+path] = string(data)
		if strings.Contains(string(data), "ENC[AES256_GCM,") {
			encrypted++
		}
	}
	if encrypted == 0 {
		t.Fatalf("the artifact holds no SOPS-encrypted file: the scan would prove nothing")
	}
	assertNoPlaintext(t, texts, values...)
}

// assertExamplesDeployed waits until the root Kustomization and the two Kustomizations
// (foundation, workloads) of each of the three example tenants (Customer, Starter and Enterprise, under the given
// codes) are Ready, their twelve HelmReleases are Ready and their Deployments Available.
// The Secrets come encrypted with the tenants (exampleTenants).
func assertExamplesDeployed(t *testing.T, root, customer, starter, enterprise string) {
	t.Helper()
	ctx := context.Background()
	ns := func(code string) string { return "eva-tenant-" + strings.ToLower(code) }
	codes, err := labels.Parse(fmt.Sprintf("%s in (%s,%s,%s)", tenant.LabelCapsule, customer, starter, enterprise))
	if err != nil {
		t.Fatal(err)
	}
	poll(t, "the tree's root Kustomization Ready", 2*time.Minute, func() error {
		return allReady(ctx, kustomizationGVK, 1, client.InNamespace(testcluster.FluxNamespace), client.MatchingFields{"metadata.name": root})
	})
	// Two per tenant: the foundation and the workloads.
	poll(t, "every tenant Kustomization Ready", 6*time.Minute, func() error {
		return allReady(ctx, kustomizationGVK, 6, client.InNamespace(testcluster.FluxNamespace), client.MatchingLabelsSelector{Selector: codes})
	})
	// Customer 4 modules, Starter 2, Enterprise 6. The workloads Kustomizations do not
	// wait for them: helm-controller installs them after.
	poll(t, "every HelmRelease Ready", 6*time.Minute, func() error {
		return allReady(ctx, helmReleaseGVK, 12, client.MatchingLabelsSelector{Selector: codes})
	})
	available := 0
	for _, code := range []string{customer, starter, enterprise} {
		var deployments appsv1.DeploymentList
		if err := cluster.Client.List(ctx, &deployments, client.InNamespace(ns(code))); err != nil {
			t.Fatal(err)
		}
		for _, d := range deployments.Items {
			for _, c := range d.Status.Conditions {
				if c.Type == appsv1.DeploymentAvailable && c.Status == "True" {
					available++
				}
			}
		}
	}
	if available != 12 {
		t.Errorf("%d module Deployments Available, want 12", available)
	}
}

// requestReconcile asks a Flux object in flux-system to reconcile now, as
// `flux reconcile` does (the reconcile.fluxcd.io/requestedAt annotation).
func requestReconcile(t *testing.T, kind, name string) {
	t.Helper()
	requestReconcileOn(t, cluster.Client, kind, name)
}

// requestReconcileOn is requestReconcile on the cluster c reaches.
func requestReconcileOn(t *testing.T, c client.Client, kind, name string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	gv := "source.toolkit.fluxcd.io/v1"
	if kind == "Kustomization" {
		gv = "kustomize.toolkit.fluxcd.io/v1"
	}
	u.SetAPIVersion(gv)
	u.SetKind(kind)
	u.SetNamespace(testcluster.FluxNamespace)
	u.SetName(name)
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":%q}}}`, time.Now().Format(time.RFC3339Nano)))
	if err := c.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}
