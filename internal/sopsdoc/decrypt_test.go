package sopsdoc_test

import (
	"bytes"
	"encoding/base64"
	"os"
	"os/exec"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/aidonow/eva/internal/sopsdoc"
	"github.com/aidonow/eva/internal/testcluster"
)

// sopsEncrypt encrypts a Secret manifest with the real sops CLI (built by
// hack/e2e-binaries.sh, as make test does before running the tests) for the recipient.
func sopsEncrypt(t *testing.T, manifest string, recipient string) string {
	t.Helper()
	bins, err := testcluster.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bins.Sops); err != nil {
		t.Fatalf("%s is not built: run make e2e-binaries", bins.Sops)
	}
	cmd := exec.Command(bins.Sops, "--encrypt", "--age", recipient, "--encrypted-regex", "^(data|stringData)$",
		"--input-type", "yaml", "--output-type", "yaml", "/dev/stdin")
	cmd.Dir = t.TempDir()
	cmd.Stdin = strings.NewReader(manifest)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sops: %v\n%s", err, stderr.String())
	}
	return string(out)
}

const plainManifest = `apiVersion: v1
kind: Secret
metadata:
  name: acmeco-crm-database
  namespace: eva-tenant-acmeco
  labels:
    reconcile.fluxcd.io/watch: Enabled
type: Opaque
stringData:
  password: correct-horse-battery-staple
  url: postgres://crm@db:5432/crm
data:
  cert: ` + "Y2VydGlmaWNhdGU=" + `
`

// TestDecryptReadsWhatSopsWrote decrypts what the real sops CLI encrypted, and refuses
// every tampering SOPS itself refuses: a changed namespace (another tenant replaying the
// file), a value moved to another key, another document's value, and a key that is not
// the cluster's.
func TestDecryptReadsWhatSopsWrote(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	doc := sopsEncrypt(t, plainManifest, id.Recipient().String())
	checked, issues := sopsdoc.Check([]byte(doc), "acmeco-crm-database", "eva-tenant-acmeco")
	if len(issues) > 0 {
		t.Fatalf("Check refuses what sops wrote: %v", issues)
	}
	// What Eva publishes of a file sops wrote is that file: its form is sops' own.
	if string(checked.Canonical) != doc {
		t.Errorf("Eva's form of what sops wrote differs:\n%s\nsops wrote:\n%s", checked.Canonical, doc)
	}
	values, err := sopsdoc.Decrypt([]byte(doc), id)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"password": "correct-horse-battery-staple", "url": "postgres://crm@db:5432/crm", "cert": "certificate"}
	for k, v := range want {
		if string(values[k]) != v {
			t.Errorf("%s: got %q, want %q", k, values[k], v)
		}
	}
	if len(values) != len(want) {
		t.Errorf("%d values, want %d", len(values), len(want))
	}

	other, _ := age.GenerateX25519Identity()
	otherDoc := sopsEncrypt(t, plainManifest, id.Recipient().String())
	line := func(doc, key string) string {
		for _, l := range strings.Split(doc, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), key+":") {
				return l
			}
		}
		t.Fatalf("no %s in\n%s", key, doc)
		return ""
	}
	tampered := map[string]struct {
		doc    string
		ids    []age.Identity
		phrase string
	}{
		"replayed into another namespace": {strings.Replace(doc, "namespace: eva-tenant-acmeco", "namespace: eva-tenant-globex", 1), nil,
			"message authentication code does not match"},
		"a value moved to another key": {strings.Replace(doc, line(doc, "url"),
			strings.Replace(line(doc, "password"), "password", "url", 1), 1), nil, "stringData.url: cannot decrypt"},
		"another document's value": {strings.Replace(doc, line(doc, "password"), line(otherDoc, "password"), 1), nil,
			"stringData.password: cannot decrypt"},
		"not the cluster's key": {doc, []age.Identity{other}, "not encrypted for this cluster"},
	}
	for name, c := range tampered {
		t.Run(name, func(t *testing.T) {
			ids := c.ids
			if ids == nil {
				ids = []age.Identity{id}
			}
			values, err := sopsdoc.Decrypt([]byte(c.doc), ids...)
			if err == nil || !strings.Contains(err.Error(), c.phrase) {
				t.Fatalf("got %v, %v; want an error saying %q", values, err, c.phrase)
			}
			if strings.Contains(err.Error(), "correct-horse") || strings.Contains(err.Error(), base64.StdEncoding.EncodeToString([]byte("certificate"))) {
				t.Errorf("the error carries a value: %v", err)
			}
		})
	}
}
