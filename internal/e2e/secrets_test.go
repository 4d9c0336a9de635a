package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testcluster"
	"github.com/aidonow/eva/internal/testenv"
)

// decryptionSecret holds the suite's age private key in flux-system, as a platform team
// creates it once per cluster; the dev environment's secrets settings name it.
const decryptionSecret = "sops-age"

// ageRecipient is the public key of the suite's age key: every tenant Secret the suite
// publishes is encrypted for it, with the sops CLI.
var ageRecipient string

// createDecryptionKey generates the suite's age key and stores its private half where
// kustomize-controller reads it (and nowhere else: not on disk, not in git).
func createDecryptionKey(ctx context.Context) (map[string]any, error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return nil, err
	}
	ageRecipient = id.Recipient().String()
	key := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testcluster.FluxNamespace, Name: decryptionSecret},
		StringData: map[string]string{"identity.agekey": id.String()},
	}
	if err := cluster.Client.Create(ctx, key); err != nil {
		return nil, fmt.Errorf("creating the decryption key: %w", err)
	}
	// The same key where the operator reads it in pure-cluster mode (--sops-age-secret).
	key = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: decryptionSecret},
		StringData: map[string]string{"identity.agekey": id.String()},
	}
	if err := cluster.Client.Create(ctx, key); err != nil {
		return nil, fmt.Errorf("creating the operator's decryption key: %w", err)
	}
	return map[string]any{"decryptionSecret": decryptionSecret, "ageRecipients": []string{ageRecipient}}, nil
}

// encryptSecret writes the tenant's Secret <code>-<name> holding data, encrypted with
// the real sops CLI for the suite's recipient, as tenants/<CODE>.<name>.sops.yaml in dir.
func encryptSecret(t *testing.T, dir, code, name string, data map[string]string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, code+"."+name+".sops.yaml"), sopsEncrypt(t, code, name, data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sopsEncrypt returns the tenant's Secret <code>-<name> holding data, encrypted with the
// real sops CLI for the suite's recipient. The plaintext reaches sops on its standard
// input only.
func sopsEncrypt(t *testing.T, code, name string, data map[string]string) []byte {
	t.Helper()
	manifest, err := yaml.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{
			"name": strings.ToLower(code) + "-" + name, "namespace": tenant.Namespace(code),
			"labels": map[string]string{"reconcile.fluxcd.io/watch": "Enabled"},
		},
		"stringData": data,
	})
	if err != nil {
		t.Fatal(err)
	}
	bins, err := testcluster.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bins.Sops, "--encrypt", "--age", ageRecipient, "--encrypted-regex", "^(data|stringData)$",
		"--input-type", "yaml", "--output-type", "yaml", "/dev/stdin")
	cmd.Dir = t.TempDir() // no .sops.yaml to pick up
	cmd.Stdin = bytes.NewReader(manifest)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sops --encrypt: %v\n%s", err, stderr.String())
	}
	return out
}

// withDatabasePassword gives a Customer tenant its crm database password the way a user
// applying an EvaTenant does: encrypted with sops into spec.secrets, read by valuesFrom.
func withDatabasePassword(t *testing.T, password string) func(*unstructured.Unstructured) {
	return func(tn *unstructured.Unstructured) {
		if tierOf(tn) != evav1.TierCustomer {
			return
		}
		code := codeOf(tn)
		spec := tn.Object["spec"].(map[string]any)
		spec["secrets"] = []any{map[string]any{"name": "crm-database", "sops": string(sopsEncrypt(t, code, "crm-database", map[string]string{"password": password}))}}
		spec["valuesFrom"] = []any{map[string]any{"module": "crm", "kind": "Secret", "name": tenant.SecretName(code, "crm-database"),
			"valuesKey": "password", "targetPath": "database.password"}}
	}
}

// exampleTenants copies the example tenant files with each capsule code (and the
// lower-case names derived from it) replaced, so one scenario can publish the examples
// next to another without the two fighting over a code, and gives every Secret their
// valuesFrom reads an encrypted file of its own, with a fresh random value. It returns
// the folder and each Secret's values by "<namespace>/<name>".
func exampleTenants(t *testing.T, codes map[string]string) (string, map[string]map[string]string) {
	t.Helper()
	dir := t.TempDir()
	values := map[string]map[string]string{}
	for from, to := range codes {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "tenants", from+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(data), from, to)
		text = strings.ReplaceAll(text, strings.ToLower(from), strings.ToLower(to))
		if err := os.WriteFile(filepath.Join(dir, to+".yaml"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		var tn evav1.EvaTenant
		if err := yaml.Unmarshal([]byte(text), &tn); err != nil {
			t.Fatal(err)
		}
		for _, ref := range tn.Spec.ValuesFrom {
			if ref.Kind != evav1.ValuesKind("Secret") {
				continue
			}
			key := values[tenant.Namespace(to)+"/"+ref.Name]
			if key == nil {
				key = map[string]string{}
				values[tenant.Namespace(to)+"/"+ref.Name] = key
			}
			key[ref.ValuesKey] = randomSecret()
		}
	}
	for ref, data := range values {
		ns, name, _ := strings.Cut(ref, "/")
		code := strings.ToUpper(strings.TrimPrefix(ns, "eva-tenant-"))
		encryptSecret(t, dir, code, strings.TrimPrefix(name, strings.ToLower(code)+"-"), data)
	}
	return dir, values
}

// randomSecret is a value no test or component could print by chance.
func randomSecret() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "e2e-secret-" + hex.EncodeToString(b)
}

// releaseValues returns the user-supplied values of the latest deployed revision of a
// Helm release, read from Helm's own storage (the release Secret helm-controller wrote)
// and its revision.
func releaseValues(ctx context.Context, ns, release string) (map[string]any, int, error) {
	var secrets corev1.SecretList
	if err := cluster.Client.List(ctx, &secrets, client.InNamespace(ns),
		client.MatchingLabels{"owner": "helm", "name": release, "status": "deployed"}); err != nil {
		return nil, 0, err
	}
	var latest *corev1.Secret
	version := 0
	for i := range secrets.Items {
		if v, _ := strconv.Atoi(secrets.Items[i].Labels["version"]); v > version {
			latest, version = &secrets.Items[i], v
		}
	}
	if latest == nil {
		return nil, 0, fmt.Errorf("no deployed revision of release %s/%s", ns, release)
	}
	// Helm stores the release as base64 of gzipped JSON.
	raw, err := base64.StdEncoding.DecodeString(string(latest.Data["release"]))
	if err != nil {
		return nil, 0, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, 0, err
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		return nil, 0, err
	}
	var rel struct {
		Config map[string]any `json:"config"`
	}
	if err := json.Unmarshal(body, &rel); err != nil {
		return nil, 0, err
	}
	return rel.Config, version, nil
}

// scanForPlaintext looks for each secret value in everything published, logged or
// reported: every object ever written to the git repository (all of its history), the
// given command outputs, and what assertNoPlaintext scans. It fails the test for each
// place a value is found, and also when the repository holds no SOPS-encrypted file (a
// scan of the wrong repository finds nothing and proves nothing).
func scanForPlaintext(t *testing.T, bare string, outputs map[string]string, secrets ...string) {
	t.Helper()
	places := map[string]string{}
	for k, v := range outputs {
		places[k] = v
	}
	encrypted := 0
	if _, err := testenv.GitObjects(bare, func(what string, data []byte) {
		if bytes.Contains(data, []byte("ENC[AES256_GCM,")) {
			encrypted++
		}
		places["git "+what] = string(data)
	}); err != nil {
		t.Fatal(err)
	}
	if encrypted == 0 {
		t.Fatalf("%s holds no SOPS-encrypted file: the scan would prove nothing", bare)
	}
	t.Logf("%d git objects with SOPS-encrypted content", encrypted)
	assertNoPlaintext(t, places, secrets...)
}

// assertNoPlaintext looks for each secret value in the given texts, the Flux
// controllers' whole output, every Event of the cluster, and the status of every Flux
// Kustomization and HelmRelease, and fails the test for each place a value is found.
func assertNoPlaintext(t *testing.T, texts map[string]string, secrets ...string) {
	t.Helper()
	ctx := context.Background()
	places := maps.Clone(texts)
	for _, name := range []string{"source-controller", "kustomize-controller", "helm-controller"} {
		places[name+" output"] = cluster.Output(name)
	}
	var events corev1.EventList
	if err := cluster.Client.List(ctx, &events); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		places["event "+e.Namespace+"/"+e.Name] = e.Message + " " + e.Reason
	}
	for _, gvk := range []string{"KustomizationList", "HelmReleaseList"} {
		list := &unstructured.UnstructuredList{}
		if gvk == "KustomizationList" {
			list.SetGroupVersionKind(kustomizationGVK.GroupVersion().WithKind(gvk))
		} else {
			list.SetGroupVersionKind(helmReleaseGVK.GroupVersion().WithKind(gvk))
		}
		if err := cluster.Client.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		for _, u := range list.Items {
			status, _ := json.Marshal(u.Object["status"])
			places[u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName()+" status"] = string(status)
		}
	}
	for where, text := range places {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("a secret value is in plaintext in %s", where)
			}
		}
	}
	t.Logf("scanned %d places for %d secret values", len(places), len(secrets))
}
