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
	"github.com/aidonow/eva/internal/sopsdoc"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testcluster"
	"github.com/aidonow/eva/internal/testenv"
)

// keySecretPrefix names each tenant's decryption Secret in flux-system (and, for
// pure-cluster mode, in the operator's namespace), as a platform team creates one per
// tenant; the dev environment's secrets settings name it.
const keySecretPrefix = "sops-age-"

// secretCodes are the codes of the suite's tenants with encrypted Secrets: each has an
// age key of its own, and nothing else in the suite can decrypt its Secrets.
var secretCodes = []string{"ACMECO", "GLOBEX", "OCIACM", "OCIGLO", "GITCUS", "PURCUS"}

// ageRecipients are the public keys of the suite's tenants, by code: every tenant Secret
// the suite publishes is encrypted for its tenant's, with the sops CLI.
var ageRecipients = map[string]string{}

// createDecryptionKeys generates each tenant's age key and stores its private half where
// kustomize-controller and the operator read it (and nowhere else: not on disk, not in
// git). It returns the environment's secrets settings.
func createDecryptionKeys(ctx context.Context) (map[string]any, error) {
	recipients := map[string]any{}
	for _, code := range secretCodes {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			return nil, err
		}
		ageRecipients[code] = id.Recipient().String()
		recipients[code] = []string{id.Recipient().String()}
		for _, ns := range []string{testcluster.FluxNamespace, operatorNamespace} {
			key := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: keySecretPrefix + strings.ToLower(code)},
				StringData: map[string]string{"identity.agekey": id.String()},
			}
			if err := cluster.Client.Create(ctx, key); err != nil {
				return nil, fmt.Errorf("creating the decryption key %s/%s: %w", ns, key.Name, err)
			}
		}
	}
	return map[string]any{"keySecretPrefix": keySecretPrefix, "recipients": recipients}, nil
}

// encryptSecret writes the tenant's Secret <code>-<name> holding data, encrypted with
// the real sops CLI for the tenant's recipient, as tenants/<CODE>.<name>.sops.yaml in dir.
func encryptSecret(t *testing.T, dir, code, name string, data map[string]string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, code+"."+name+".sops.yaml"), sopsEncrypt(t, code, name, data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sopsEncrypt returns the tenant's Secret <code>-<name> holding data, encrypted with the
// real sops CLI for the tenant's recipient. The plaintext reaches sops on its standard
// input only.
func sopsEncrypt(t *testing.T, code, name string, data map[string]string) []byte {
	t.Helper()
	recipient := ageRecipients[code]
	if recipient == "" {
		t.Fatalf("tenant %s has no age key: add it to secretCodes", code)
	}
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
	cmd := exec.Command(bins.Sops, "--encrypt", "--age", recipient, "--encrypted-regex", "^(data|stringData)$",
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
// applying an EvaTenant does: encrypted with sops into spec.secrets, mounted into the crm
// pods by spec.secretMounts.
func withDatabasePassword(t *testing.T, password string) func(*unstructured.Unstructured) {
	return func(tn *unstructured.Unstructured) {
		if tierOf(tn) != evav1.TierCustomer {
			return
		}
		code := codeOf(tn)
		spec := tn.Object["spec"].(map[string]any)
		spec["secrets"] = []any{map[string]any{"name": "crm-database", "sops": string(sopsEncrypt(t, code, "crm-database", map[string]string{"password": password}))}}
		spec["secretMounts"] = []any{map[string]any{"module": "crm", "secret": "crm-database"}}
	}
}

// exampleTenants copies the example tenant files with each capsule code (and the
// lower-case names derived from it) replaced, so one scenario can publish the examples
// next to another without the two fighting over a code, and gives every Secret their
// secretMounts name an encrypted file of its own, with the keys of the shipped example
// and fresh hostile values (hostileSecret). It returns the folder and each Secret's
// values by "<namespace>/<name>".
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
		for _, m := range tn.Spec.SecretMounts {
			example, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "tenants", from+"."+m.Secret+".sops.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			doc, issues := sopsdoc.Check(example, tenant.SecretName(from, m.Secret), tenant.Namespace(from))
			if len(issues) > 0 {
				t.Fatalf("the example Secret %s of %s: %v", m.Secret, from, issues)
			}
			data := map[string]string{}
			for _, k := range doc.Keys {
				data[k] = hostileSecret()
			}
			values[tenant.Namespace(to)+"/"+tenant.SecretName(to, m.Secret)] = data
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

// hostileSecret is a random value that, parsed as Helm --set input, would set other
// values (an image from elsewhere, more replicas) and, as a template, print the release:
// it must reach the Secret byte for byte and change nothing else.
func hostileSecret() string {
	return randomSecret() + `,image.repository=attacker.example/x,replicaCount=20` + "\n" + `{{ .Release.Name }} "quoted" 'single' = ,`
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
