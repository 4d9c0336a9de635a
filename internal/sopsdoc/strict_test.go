package sopsdoc_test

import (
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/aidonow/eva/internal/sopsdoc"
)

const (
	secretName = "acmeco-crm-database"
	secretNS   = "eva-tenant-acmeco"
	encValue   = "ENC[AES256_GCM,data:xgrklQ5QlKIUTgKHUwhhXJBTmo9MMXbCCmMs,iv:/8gS/L5E6f4NOUiFp2RsCyOWZ5YqXsL62xiAdkb4rpA=,tag:GnXMNgKDfXL779dFvIqZ3Q==,type:str]"
	recipient  = "age100vamtj4ypar8tdvtralkclnhq0szhegad8pvvj2w7zlxrmz8s7snr94yr"
)

// sopsMeta is SOPS' metadata as sops 3.11 writes it (the values need not decrypt: Check
// reads the shape, not the plaintext).
const sopsMeta = `sops:
    age:
        - recipient: ` + recipient + `
          enc: |
            -----BEGIN AGE ENCRYPTED FILE-----
            YWdlLWVuY3J5cHRpb24ub3JnL3YxCi0+IFgyNTUxOSByK1BUQy9vMFo2Q0ZLdnN3
            -----END AGE ENCRYPTED FILE-----
    lastmodified: "2026-11-23T18:11:32Z"
    mac: ` + encValue + `
    encrypted_regex: ^(data|stringData)$
    version: 3.11.0
`

const validSecret = `apiVersion: v1
kind: Secret
metadata:
    name: ` + secretName + `
    namespace: ` + secretNS + `
    labels:
        reconcile.fluxcd.io/watch: Enabled
stringData:
    password: ` + encValue + `
` + sopsMeta

// smuggledList is issue 32's critical finding: anchors hidden under sops, then alias
// keys. Read by key text with the last duplicate winning (Eva before), it is the
// Secret; read by kustomize (aliases resolved, the first kind kept), it is a List whose
// item, a ConfigMap here, is applied as any object would be.
var smuggledList = sopsMeta + `    xa: &kind xkind
    xb: &stringData items
kind: List
*kind : Secret
apiVersion: v1
metadata:
    name: ` + secretName + `
    namespace: ` + secretNS + `
*stringData :
    - apiVersion: v1
      kind: ConfigMap
      metadata:
          name: planted
          namespace: eva-tenant-globex
stringData:
    password: ` + encValue + `
`

// hostileSecrets are documents an attacker wrote so that Eva and kustomize read them two
// ways, or that carry what Eva would not write: each must be refused with the line and
// field named. The first is issue 32's finding: alias keys whose anchors hide under
// sops, which kustomize resolved into a List of arbitrary objects.
var hostileSecrets = map[string]struct {
	doc   string
	line  int
	field string
}{
	"alias keys smuggle a List": {smuggledList, 12, "sops.xa"},
	"an anchor on a value":      {strings.Replace(validSecret, "kind: Secret", "kind: &s Secret", 1), 2, "kind"},
	"an alias as a value": {strings.Replace(strings.Replace(validSecret, "kind: Secret", "kind: &s Secret", 1),
		"    version: 3.11.0", "    version: 3.11.0\n    encrypted_suffix: *s", 1), 21, "sops.encrypted_suffix"},
	"a merge key":                  {strings.Replace(validSecret, "metadata:\n", "metadata:\n    <<: {annotations: {a: b}}\n", 1), 4, "metadata"},
	"a duplicate kind":             {strings.Replace(validSecret, "kind: Secret\n", "kind: Secret\nkind: List\n", 1), 3, "kind"},
	"a duplicate data key":         {strings.Replace(validSecret, "    password: "+encValue, "    password: "+encValue+"\n    password: "+encValue, 1), 10, "stringData.password"},
	"an explicit tag":              {strings.Replace(validSecret, "kind: Secret", "kind: !!str Secret", 1), 2, "kind"},
	"a custom tag":                 {strings.Replace(validSecret, "kind: Secret", "kind: !Secret Secret", 1), 2, "kind"},
	"a comment":                    {"# hello\n" + validSecret, 2, "apiVersion"},
	"a line comment":               {strings.Replace(validSecret, "kind: Secret", "kind: Secret # sure", 1), 2, "kind"},
	"an unquoted timestamp":        {strings.Replace(validSecret, `lastmodified: "2026-11-23T18:11:32Z"`, `lastmodified: 2026-11-23T18:11:32Z`, 1), 17, "sops.lastmodified"},
	"a number":                     {strings.Replace(validSecret, "    version: 3.11.0", "    version: 3", 1), 20, "sops.version"},
	"an unknown sops field":        {validSecret + "    shamir_threshold: \"1\"\n", 21, "sops.shamir_threshold"},
	"another key service":          {validSecret + "    pgp:\n        - fp: \"ABCD\"\n", 21, "sops.pgp"},
	"an extra age field":           {strings.Replace(validSecret, "          enc: |", "          extra: x\n          enc: |", 1), 13, "sops.age[0].extra"},
	"two documents":                {validSecret + "---\n" + validSecret, 1, ""},
	"a service-account token":      {strings.Replace(validSecret, "stringData:", "type: kubernetes.io/service-account-token\nstringData:", 1), 8, "type"},
	"a List":                       {strings.Replace(validSecret, "kind: Secret", "kind: List", 1), 2, "kind"},
	"an annotation":                {strings.Replace(validSecret, "    labels:", "    annotations:\n        a: b\n    labels:", 1), 6, "metadata.annotations"},
	"labels as a list":             {strings.Replace(validSecret, "        reconcile.fluxcd.io/watch: Enabled\n", "        - reconcile.fluxcd.io/watch\n", 1), 7, "metadata.labels"},
	"a key in data and stringData": {strings.Replace(validSecret, "stringData:\n    password: "+encValue, "stringData:\n    password: "+encValue+"\ndata:\n    password: "+encValue, 1), 9, "stringData.password"},
	"a key named ..":               {strings.Replace(validSecret, "    password: ", "    ..: ", 1), 9, "stringData"},
	"a flow key":                   {strings.Replace(validSecret, "kind: Secret", "? [kind]\n: Secret", 1), 2, ""},
}

// TestCheckRefusesWhatReadersMayReadTwoWays holds Check to refusing every hostile
// document with the line and field of the construct at fault.
func TestCheckRefusesWhatReadersMayReadTwoWays(t *testing.T) {
	if s, issues := sopsdoc.Check([]byte(validSecret), secretName, secretNS); len(issues) > 0 || s == nil {
		t.Fatalf("the valid document is refused: %v", issues)
	}
	for name, c := range hostileSecrets {
		t.Run(name, func(t *testing.T) {
			s, issues := sopsdoc.Check([]byte(c.doc), secretName, secretNS)
			if s != nil || len(issues) == 0 {
				t.Fatalf("accepted:\n%s", c.doc)
			}
			if !slices.ContainsFunc(issues, func(is sopsdoc.Issue) bool { return is.Line == c.line && is.Field == c.field }) {
				t.Errorf("no issue at line %d, field %q: %+v", c.line, c.field, issues)
			}
		})
	}
}

// TestSmuggledListIsWhatKustomizeReads shows the two readings of smuggledList apart:
// kustomize builds the author's bytes into the planted ConfigMap, which is why Check
// refuses such a document and Eva publishes only its own form.
func TestSmuggledListIsWhatKustomizeReads(t *testing.T) {
	resources := kustomizeBuild(t, []byte(smuggledList))
	planted := false
	for _, r := range resources {
		planted = planted || r.GetKind() == "ConfigMap" && r.GetName() == "planted"
	}
	if !planted {
		t.Fatalf("kustomize did not read the List the attack relies on: %d objects", len(resources))
	}
}

// TestCanonicalIsWhatKustomizeBuilds checks the document Eva publishes against
// kustomize's own library (krusty, as kustomize-controller links it): it builds into
// exactly the one Secret Check reported, and Eva reads its own form as it read the
// author's, byte for byte.
func TestCanonicalIsWhatKustomizeBuilds(t *testing.T) {
	authored := strings.Replace(validSecret, "stringData:", "type: 'Opaque'\nstringData:", 1)
	authored = strings.Replace(authored, "    version: 3.11.0", "    version: \"3.11.0\"\n    kms: []\n    mac_only_encrypted: false", 1)
	s, issues := sopsdoc.Check([]byte(authored), secretName, secretNS)
	if len(issues) > 0 {
		t.Fatalf("refused: %v", issues)
	}
	if strings.Contains(string(s.Canonical), "kms") || strings.Contains(string(s.Canonical), "mac_only_encrypted") {
		t.Errorf("the canonical form keeps metadata that says nothing:\n%s", s.Canonical)
	}
	again, issues := sopsdoc.Check(s.Canonical, secretName, secretNS)
	if len(issues) > 0 {
		t.Fatalf("Eva refuses its own form: %v\n%s", issues, s.Canonical)
	}
	if string(again.Canonical) != string(s.Canonical) {
		t.Errorf("the canonical form is not a fixed point:\n%s\n---\n%s", s.Canonical, again.Canonical)
	}
	assertKustomizeBuildsSecret(t, s)
}

// assertKustomizeBuildsSecret builds s.Canonical with kustomize and requires exactly
// the Secret Check described: its name, namespace, keys, at most the watch label, type
// Opaque or none, and no field but those and sops.
func assertKustomizeBuildsSecret(t testing.TB, s *sopsdoc.Secret) {
	t.Helper()
	resources := kustomizeBuild(t, s.Canonical)
	if len(resources) != 1 {
		t.Fatalf("kustomize built %d objects from one Secret:\n%s", len(resources), s.Canonical)
	}
	obj, err := resources[0].Map()
	if err != nil {
		t.Fatal(err)
	}
	if obj["apiVersion"] != "v1" || obj["kind"] != "Secret" {
		t.Errorf("kustomize built %v/%v", obj["apiVersion"], obj["kind"])
	}
	for k := range obj {
		if !slices.Contains([]string{"apiVersion", "kind", "metadata", "type", "data", "stringData", "sops"}, k) {
			t.Errorf("kustomize built a field %q Check did not allow", k)
		}
	}
	if typ, ok := obj["type"]; ok && typ != "Opaque" {
		t.Errorf("type %v", typ)
	}
	md, _ := obj["metadata"].(map[string]any)
	if md["name"] != s.Name || md["namespace"] != secretNS {
		t.Errorf("kustomize built %v/%v, Eva checked %s/%s", md["namespace"], md["name"], secretNS, s.Name)
	}
	for k, v := range md {
		switch k {
		case "name", "namespace":
		case "labels":
			labels, _ := v.(map[string]any)
			for lk, lv := range labels {
				if lk != sopsdoc.WatchLabel || lv != "Enabled" {
					t.Errorf("label %s=%v", lk, lv)
				}
			}
		default:
			t.Errorf("kustomize built metadata.%s", k)
		}
	}
	var keys []string
	for _, section := range []string{"data", "stringData"} {
		m, _ := obj[section].(map[string]any)
		for k, v := range m {
			if str, ok := v.(string); !ok || !strings.HasPrefix(str, "ENC[AES256_GCM,") {
				t.Errorf("%s.%s is not an encrypted string", section, k)
			}
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if !slices.Equal(keys, s.Keys) {
		t.Errorf("kustomize built keys %v, Eva checked %v", keys, s.Keys)
	}
}

// kustomizeBuild builds one file as kustomize-controller's library does.
func kustomizeBuild(t testing.TB, doc []byte) []*resource.Resource {
	t.Helper()
	fs := filesys.MakeFsInMemory()
	if err := fs.WriteFile("/k/secret.yaml", doc); err != nil {
		t.Fatal(err)
	}
	if err := fs.WriteFile("/k/kustomization.yaml", []byte("resources:\n- secret.yaml\n")); err != nil {
		t.Fatal(err)
	}
	built, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/k")
	if err != nil {
		t.Fatalf("kustomize cannot build the document: %v\n%s", err, doc)
	}
	return built.Resources()
}

// FuzzCheckReadsAsKustomize is the differential fuzz target: whatever document Check
// accepts, kustomize builds Eva's published form of it into exactly the Secret Check
// described, and Check reads that form again to the same bytes.
func FuzzCheckReadsAsKustomize(f *testing.F) {
	f.Add(validSecret)
	for _, c := range hostileSecrets {
		f.Add(c.doc)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		s, issues := sopsdoc.Check([]byte(doc), secretName, secretNS)
		if len(issues) > 0 {
			return
		}
		again, issues := sopsdoc.Check(s.Canonical, secretName, secretNS)
		if len(issues) > 0 || string(again.Canonical) != string(s.Canonical) {
			t.Fatalf("Eva reads its own form otherwise: %v\n%s", issues, s.Canonical)
		}
		assertKustomizeBuildsSecret(t, s)
	})
}

// TestCheckSaysTheWholeFileIsEncrypted: a Secret encrypted whole (sops without the
// fleet's .sops.yaml rule) gets one issue that says what to do, not one per field.
func TestCheckSaysTheWholeFileIsEncrypted(t *testing.T) {
	whole := `apiVersion: ` + encValue + `
kind: ` + encValue + `
metadata:
    name: ` + encValue + `
    namespace: ` + encValue + `
stringData:
    password: ` + encValue + `
` + strings.Replace(sopsMeta, "    encrypted_regex: ^(data|stringData)$\n", "", 1)
	s, issues := sopsdoc.Check([]byte(whole), secretName, secretNS)
	if s != nil || len(issues) != 1 {
		t.Fatalf("Check of a wholly encrypted Secret: %d issues %+v, want one", len(issues), issues)
	}
	if got := issues[0]; got.Line != 1 || got.Field != "apiVersion" ||
		!strings.Contains(got.Message, "the whole file is encrypted") || !strings.Contains(got.Message, "--encrypted-regex") {
		t.Errorf("the issue: %+v, want line 1, field apiVersion, saying the whole file is encrypted and how to encrypt it", got)
	}
}
