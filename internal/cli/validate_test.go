package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validTenant is a complete, valid Customer tenant used as the base of bad inputs.
const validTenant = `apiVersion: eva.aidonow.com/v1alpha1
kind: EvaTenant
metadata:
  name: acmeco
spec:
  capsuleCode: ACMECO
  tier: Customer
  wave: 2
  seedsVersion: seeds-1.0.0
  versions:
    crm: 1.4.0
  helmValues:
    crm:
      replicaCount: 2
  # The crm pods mount the tenant's Secret acmeco-crm-database, which
  # ACMECO.crm-database.sops.yaml beside this file holds, at
  # /var/run/secrets/eva/crm-database: the password never passes through Helm.
  secretMounts:
    - module: crm
      secret: crm-database
`

// tenantWith returns a valid tenant whose spec ends with extra lines (indented by two).
func tenantWith(code, tier, extra string) string {
	return fmt.Sprintf(`apiVersion: eva.aidonow.com/v1alpha1
kind: EvaTenant
metadata:
  name: %s
spec:
  capsuleCode: %s
  tier: %s
%s`, strings.ToLower(code), code, tier, extra)
}

func runValidate(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Execute(append([]string{"validate"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// exampleSecret is the example Customer's encrypted database password (for the dev
// environment's recipient), which validTenant's secretMounts hands to crm.
const exampleSecret = "ACMECO.crm-database.sops.yaml"

// writeFiles writes the files into a new folder, with the example's encrypted Secret
// beside a tenant file that reads it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if _, ok := files[exampleSecret]; !ok && strings.Contains(files["ACMECO.yaml"], "secret: crm-database\n") {
		data, err := os.ReadFile(filepath.Join(repoRoot, "tenants", exampleSecret))
		if err != nil {
			t.Fatal(err)
		}
		files = maps.Clone(files)
		files[exampleSecret] = string(data)
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestValidateRejectsBadTenants(t *testing.T) {
	type want struct {
		file  string // base name of the reported file
		line  int
		field string // reported field path ("" for file-level problems)
		text  string // substring of the message
	}
	cases := map[string]struct {
		files map[string]string
		want  []want
	}{
		"malformed yaml": {
			files: map[string]string{"ACMECO.yaml": "apiVersion: eva.aidonow.com/v1alpha1\nkind: [EvaTenant\n"},
			want:  []want{{"ACMECO.yaml", 2, "", "invalid YAML"}},
		},
		"tab indentation": {
			files: map[string]string{"ACMECO.yaml": "apiVersion: x\nspec:\n\tcapsuleCode: ACMECO\n"},
			want:  []want{{"ACMECO.yaml", 3, "", "invalid YAML"}},
		},
		"empty file": {
			files: map[string]string{"ACMECO.yaml": ""},
			want:  []want{{"ACMECO.yaml", 1, "", "file is empty"}},
		},
		"only comments": {
			files: map[string]string{"ACMECO.yaml": "# nothing here\n---\n"},
			want:  []want{{"ACMECO.yaml", 1, "", "file is empty"}},
		},
		"top level is a list": {
			files: map[string]string{"ACMECO.yaml": "- a\n- b\n"},
			want:  []want{{"ACMECO.yaml", 1, "", "expected an EvaTenant object"}},
		},
		"multi-document with two tenants": {
			files: map[string]string{"ACMECO.yaml": validTenant + "---\n" + tenantWith("GLOBEX", "Enterprise", "")},
			want:  []want{{"ACMECO.yaml", 22, "", "exactly one EvaTenant"}},
		},
		"wrong apiVersion": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "eva.aidonow.com/v1alpha1", "eva.aidonow.com/v1", 1)},
			want:  []want{{"ACMECO.yaml", 1, "apiVersion", "must be eva.aidonow.com/v1alpha1"}},
		},
		"wrong kind": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "kind: EvaTenant", "kind: Tenant", 1)},
			want:  []want{{"ACMECO.yaml", 2, "kind", "must be EvaTenant"}},
		},
		"missing name": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "  name: acmeco\n", "  labels: {a: b}\n", 1)},
			want:  []want{{"ACMECO.yaml", 3, "metadata.name", "required"}},
		},
		"bad object name": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "name: acmeco", "name: Acme_Co", 1)},
			want:  []want{{"ACMECO.yaml", 4, "metadata.name", "RFC 1123"}},
		},
		"unknown top-level field": {
			files: map[string]string{"ACMECO.yaml": validTenant + "extra: 1\n"},
			want:  []want{{"ACMECO.yaml", 21, "extra", "unknown field"}},
		},
		"snake case field suggests camel case": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "capsuleCode:", "capsule_code:", 1)},
			want:  []want{{"ACMECO.yaml", 6, "spec.capsule_code", `did you mean "capsuleCode"`}},
		},
		"misspelled field suggests the closest": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "seedsVersion:", "seedVersion:", 1)},
			want:  []want{{"ACMECO.yaml", 9, "spec.seedVersion", `did you mean "seedsVersion"`}},
		},
		"unknown field in secretMounts": {
			files: map[string]string{"ACMECO.yaml": validTenant + "      key: x\n"},
			want:  []want{{"ACMECO.yaml", 21, "spec.secretMounts[0].key", "unknown field"}},
		},
		"duplicate key": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "  wave: 2\n", "  wave: 2\n  wave: 3\n", 1)},
			want:  []want{{"ACMECO.yaml", 9, "spec.wave", "duplicate key"}},
		},
		"missing capsule code": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "  capsuleCode: ACMECO\n", "", 1)},
			want:  []want{{"ACMECO.yaml", 5, "spec.capsuleCode", "required"}},
		},
		"lower-case capsule code": {
			files: map[string]string{"acmeco.yaml": strings.Replace(validTenant, "capsuleCode: ACMECO", "capsuleCode: acmeco", 1)},
			want:  []want{{"acmeco.yaml", 6, "spec.capsuleCode", "must be upper case: ACMECO"}},
		},
		"short capsule code": {
			files: map[string]string{"ACME.yaml": strings.Replace(validTenant, "capsuleCode: ACMECO", "capsuleCode: ACME", 1)},
			want:  []want{{"ACME.yaml", 6, "spec.capsuleCode", "six upper-case letters"}},
		},
		"capsule code with digits": {
			files: map[string]string{"ACME12.yaml": strings.Replace(validTenant, "capsuleCode: ACMECO", "capsuleCode: ACME12", 1)},
			want:  []want{{"ACME12.yaml", 6, "spec.capsuleCode", "six upper-case letters"}},
		},
		"capsule code as number": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "capsuleCode: ACMECO", "capsuleCode: 123456", 1)},
			want:  []want{{"ACMECO.yaml", 6, "spec.capsuleCode", "expected a string"}},
		},
		"shard chosen by the file": { // the platform assigns shards (internal/shard)
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "  name: acmeco\n", "  name: acmeco\n  labels:\n    eva.aidonow.com/shard: a\n", 1)},
			want:  []want{{"ACMECO.yaml", 6, "metadata.labels[eva.aidonow.com/shard]", "prefix is reserved"}},
		},
		"unknown tier": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "tier: Customer", "tier: Gold", 1)},
			want:  []want{{"ACMECO.yaml", 7, "spec.tier", `unsupported value "Gold"`}},
		},
		"lower-case tier": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "tier: Customer", "tier: customer", 1)},
			want:  []want{{"ACMECO.yaml", 7, "spec.tier", "supported values"}},
		},
		"missing tier": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "  tier: Customer\n", "", 1)},
			want:  []want{{"ACMECO.yaml", 5, "spec.tier", "required"}},
		},
		"bad lifecycle": {
			files: map[string]string{"ACMECO.yaml": validTenant + "  lifecycle: Paused\n"},
			want:  []want{{"ACMECO.yaml", 21, "spec.lifecycle", `unsupported value "Paused"`}},
		},
		"wave as string": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "wave: 2", `wave: "2"`, 1)},
			want:  []want{{"ACMECO.yaml", 8, "spec.wave", "expected an integer"}},
		},
		"wave out of range": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "wave: 2", "wave: 4", 1)},
			want:  []want{{"ACMECO.yaml", 8, "spec.wave", "must be 1 (internal), 2 (pilot) or 3 (fleet)"}},
		},
		"wave negative": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "wave: 2", "wave: -1", 1)},
			want:  []want{{"ACMECO.yaml", 8, "spec.wave", "must be 1"}},
		},
		"wave overflows int32": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "wave: 2", "wave: 99999999999", 1)},
			want:  []want{{"ACMECO.yaml", 8, "spec.wave", "out of range"}},
		},
		"deletionProtection as yes": {
			files: map[string]string{"ACMECO.yaml": validTenant + "  deletionProtection: yes\n"},
			want:  []want{{"ACMECO.yaml", 21, "spec.deletionProtection", "expected true or false"}},
		},
		"bad operator version": {
			files: map[string]string{"ACMECO.yaml": validTenant + "  operatorVersion: latest\n"},
			want:  []want{{"ACMECO.yaml", 21, "spec.operatorVersion", "semantic version"}},
		},
		"bad seeds version": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "seedsVersion: seeds-1.0.0", "seedsVersion: 'seeds 1'", 1)},
			want:  []want{{"ACMECO.yaml", 9, "spec.seedsVersion", "git tag"}},
		},
		"version pin as float": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "crm: 1.4.0", "crm: 1.4", 1)},
			want:  []want{{"ACMECO.yaml", 11, "spec.versions[crm]", `quote it ("1.4")`}},
		},
		"version pin not semver": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "crm: 1.4.0", "crm: latest", 1)},
			want:  []want{{"ACMECO.yaml", 11, "spec.versions[crm]", "semantic version"}},
		},
		"version pin is a range": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "crm: 1.4.0", `crm: ">=1.4.0"`, 1)},
			want:  []want{{"ACMECO.yaml", 11, "spec.versions[crm]", "exact semantic version"}},
		},
		"version pin for module outside tier": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "    crm: 1.4.0\n", "    crm: 1.4.0\n    forge: 0.6.0\n", 1)},
			want:  []want{{"ACMECO.yaml", 12, "spec.versions[forge]", `unsupported value "forge"`}},
		},
		"version pin for unknown module": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "    crm: 1.4.0\n", "    crm: 1.4.0\n    erp: 1.0.0\n", 1)},
			want:  []want{{"ACMECO.yaml", 12, "spec.versions[erp]", `supported values: "crm", "itsm", "whisper", "gateway"`}},
		},
		"versions is a list": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "    crm: 1.4.0\n", "    - crm\n", 1)},
			want:  []want{{"ACMECO.yaml", 11, "spec.versions", "expected an object"}},
		},
		"helm values for module outside tier": {
			files: map[string]string{"DEVUSR.yaml": tenantWith("DEVUSR", "Starter", "  helmValues:\n    shell:\n      replicaCount: 1\n")},
			want:  []want{{"DEVUSR.yaml", 9, "spec.helmValues[shell]", `unsupported value "shell"`}},
		},
		"helm values not an object": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "    crm:\n      replicaCount: 2\n", "    crm: [1, 2]\n", 1)},
			want:  []want{{"ACMECO.yaml", 13, "spec.helmValues[crm]", "must be an object"}},
		},
		"secret-looking value password": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "      replicaCount: 2\n", "      replicaCount: 2\n      database:\n        password: hunter2\n", 1)},
			want:  []want{{"ACMECO.yaml", 16, "spec.helmValues[crm].database.password", "hand it to the module with spec.secretMounts"}},
		},
		"secret-looking value apiKey deep in a list": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "      replicaCount: 2\n", "      replicaCount: 2\n      integrations:\n        - name: slack\n          apiKey: xoxb-1\n", 1)},
			want:  []want{{"ACMECO.yaml", 17, "spec.helmValues[crm].integrations[0].apiKey", "looks like a secret"}},
		},
		"secret-looking value snake case token": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "      replicaCount: 2\n", "      replicaCount: 2\n      GITHUB_TOKEN: ghp_x\n", 1)},
			want:  []want{{"ACMECO.yaml", 15, "spec.helmValues[crm].GITHUB_TOKEN", "looks like a secret"}},
		},
		"secret-looking value private key": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "      replicaCount: 2\n", "      replicaCount: 2\n      tls:\n        private-key: abc\n", 1)},
			want:  []want{{"ACMECO.yaml", 16, "spec.helmValues[crm].tls.private-key", "looks like a secret"}},
		},
		"secret-looking value credentials object": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "      replicaCount: 2\n", "      replicaCount: 2\n      credentials:\n        user: admin\n", 1)},
			want:  []want{{"ACMECO.yaml", 15, "spec.helmValues[crm].credentials", "looks like a secret"}},
		},
		"reserved capsule values": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "      replicaCount: 2\n", "      replicaCount: 2\n      capsule:\n        code: OTHERS\n", 1)},
			want:  []want{{"ACMECO.yaml", 15, "spec.helmValues[crm].capsule", "reserved"}},
		},
		"oversize values": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "      replicaCount: 2\n", "      replicaCount: 2\n      banner: "+strings.Repeat("x", 40000)+"\n", 1)},
			want:  []want{{"ACMECO.yaml", 13, "spec.helmValues[crm]", "may not be more than 32768 bytes"}},
		},
		"values nested too deep": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "      replicaCount: 2\n", "      a: "+strings.Repeat("{a: ", 20)+"1"+strings.Repeat("}", 20)+"\n", 1)},
			want:  []want{{"ACMECO.yaml", 14, "spec.helmValues[crm]" + strings.Repeat(".a", 16), "nested deeper than 16"}},
		},
		"secretMounts module outside tier": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "    - module: crm\n", "    - module: forge\n", 1)},
			want:  []want{{"ACMECO.yaml", 19, "spec.secretMounts[0].module", `unsupported value "forge"`}},
		},
		"secretMounts secret not a name": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "secret: crm-database", "secret: Crm_Database", 1)},
			want:  []want{{"ACMECO.yaml", 20, "spec.secretMounts[0].secret", "must be the name of one of spec.secrets"}},
		},
		"secretMounts missing secret": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "      secret: crm-database\n", "", 1)},
			want:  []want{{"ACMECO.yaml", 19, "spec.secretMounts[0].secret", "required"}},
		},
		"secretMounts duplicate mount": {
			files: map[string]string{"ACMECO.yaml": validTenant + "    - module: crm\n      secret: crm-database\n"},
			want:  []want{{"ACMECO.yaml", 21, "spec.secretMounts[1]", "duplicate"}},
		},
		"secretMounts without its encrypted Secret": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "secret: crm-database", "secret: crm-cache", 1)},
			want: []want{{"ACMECO.yaml", 20, "spec.secretMounts[0].secret",
				"no encrypted Secret provides acmeco-crm-cache: add ACMECO.crm-cache.sops.yaml beside this file"}},
		},
		"valuesFrom refused, Secret or ConfigMap": {
			files: map[string]string{"ACMECO.yaml": validTenant + "  valuesFrom:\n" +
				"    - module: crm\n      kind: Secret\n      name: acmeco-crm-database\n      valuesKey: password\n      targetPath: database.password\n" +
				"    - module: crm\n      kind: ConfigMap\n      name: acmeco-branding\n      valuesKey: theme\n      targetPath: branding.theme\n"},
			want: []want{
				{"ACMECO.yaml", 22, "spec.valuesFrom[0]", "valuesFrom is refused: helm-controller parses a referenced value as Helm --set input"},
				{"ACMECO.yaml", 27, "spec.valuesFrom[1]", "hand a Secret to a module with spec.secretMounts, and set other values in spec.helmValues"},
			},
		},
		"status in file": {
			files: map[string]string{"ACMECO.yaml": validTenant + "status:\n  phase: Active\n"},
			want:  []want{{"ACMECO.yaml", 21, "status", "written by the operator"}},
		},
		"server-set metadata in file": {
			files: map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "  name: acmeco\n", "  name: acmeco\n  resourceVersion: \"42\"\n", 1)},
			want:  []want{{"ACMECO.yaml", 5, "metadata.resourceVersion", "set by the API server"}},
		},
		"file name mismatch": {
			files: map[string]string{"acme.yaml": validTenant},
			want:  []want{{"acme.yaml", 6, "spec.capsuleCode", "file name must be ACMECO.yaml"}},
		},
		"yml extension": {
			files: map[string]string{"ACMECO.yml": validTenant},
			want:  []want{{"ACMECO.yml", 6, "spec.capsuleCode", "file name must be ACMECO.yaml"}},
		},
		"duplicate capsule codes across files": {
			files: map[string]string{
				"ACMECO.yaml":     validTenant,
				"sub/ACMECO.yaml": strings.Replace(validTenant, "name: acmeco", "name: acmeco-two", 1),
			},
			want: []want{
				{"ACMECO.yaml", 6, "spec.capsuleCode", "capsule code ACMECO is also used by"},
			},
		},
		"duplicate object names across files": {
			files: map[string]string{
				"ACMECO.yaml": validTenant,
				"GLOBEX.yaml": strings.Replace(tenantWith("GLOBEX", "Enterprise", ""), "name: globex", "name: acmeco", 1),
			},
			want: []want{{"GLOBEX.yaml", 4, "metadata.name", "object name acmeco is also used by"}},
		},
		"empty folder": {
			files: map[string]string{"README.md": "no tenants here\n"},
			want:  []want{{"", 1, "", "no tenant files"}},
		},
	}
	if len(cases) < 40 {
		t.Fatalf("only %d bad inputs; the suite must keep at least 40", len(cases))
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := writeFiles(t, tc.files)
			code, out, errOut := runValidate(t, "--output", "json", dir)
			if code != ExitInvalid {
				t.Fatalf("exit status %d, want %d\nstdout: %s\nstderr: %s", code, ExitInvalid, out, errOut)
			}
			var report struct {
				Valid    bool
				Problems []struct {
					File    string
					Line    int
					Column  int
					Field   string
					Message string
				}
			}
			if err := json.Unmarshal([]byte(out), &report); err != nil {
				t.Fatalf("json output: %v\n%s", err, out)
			}
			if report.Valid {
				t.Fatalf("report says valid")
			}
			for _, w := range tc.want {
				found := false
				for _, p := range report.Problems {
					if filepath.Base(p.File) == w.file || (w.file == "" && p.File == dir) {
						if p.Line == w.line && p.Field == w.field && strings.Contains(p.Message, w.text) && p.Column >= 1 {
							found = true
							break
						}
					}
				}
				if !found {
					t.Errorf("no problem %s:%d: %s: %q among:\n%s", w.file, w.line, w.field, w.text, out)
				}
			}
		})
	}
}

func TestValidateAcceptsExampleTenants(t *testing.T) {
	code, out, errOut := runValidate(t, "../../tenants")
	if code != ExitOK {
		t.Fatalf("exit status %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "3 tenant file(s) valid") {
		t.Errorf("summary = %q", errOut)
	}
}

func TestValidateTextAndGitHubOutput(t *testing.T) {
	dir := writeFiles(t, map[string]string{"ACMECO.yaml": strings.Replace(validTenant, "tier: Customer", "tier: Gold", 1)})
	file := filepath.Join(dir, "ACMECO.yaml")

	code, out, _ := runValidate(t, file)
	if code != ExitInvalid {
		t.Fatalf("exit status %d", code)
	}
	wantText := file + `:7:9: spec.tier: unsupported value "Gold": supported values: "Starter", "Customer", "Enterprise", "Platform"` + "\n"
	if out != wantText {
		t.Errorf("text output:\n got %q\nwant %q", out, wantText)
	}

	code, out, _ = runValidate(t, "--output=github", file)
	if code != ExitInvalid {
		t.Fatalf("exit status %d", code)
	}
	wantGH := "::error file=" + file + ",line=7,col=9,title=spec.tier::unsupported value"
	if !strings.HasPrefix(out, wantGH) {
		t.Errorf("github output:\n got %q\nwant prefix %q", out, wantGH)
	}
}

func TestValidateUsageErrors(t *testing.T) {
	for name, args := range map[string][]string{
		"missing path":     {"/does/not/exist"},
		"bad output":       {"--output", "xml", "../../tenants"},
		"unknown flag":     {"--frobnicate"},
		"bad catalog file": {"--catalog", "/does/not/exist.yaml", "../../tenants"},
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := runValidate(t, args...)
			if code != ExitUsage {
				t.Fatalf("exit status %d, want %d\n%s%s", code, ExitUsage, out, errOut)
			}
			if !strings.HasPrefix(errOut, "evactl: ") {
				t.Errorf("stderr = %q, want an evactl: message", errOut)
			}
		})
	}
}

func TestValidateWithReplacementCatalog(t *testing.T) {
	// A platform team moves forge into the Starter tier without recompiling.
	catalog := strings.Replace(string(mustRead(t, "../tenant/catalog.yaml")), "modules: [crm, itsm]", "modules: [crm, itsm, forge]", 1)
	dir := writeFiles(t, map[string]string{
		"catalog.yaml":  catalog,
		"t/DEVUSR.yaml": tenantWith("DEVUSR", "Starter", "  versions:\n    forge: 0.6.0\n"),
	})
	if code, out, errOut := runValidate(t, filepath.Join(dir, "t")); code != ExitInvalid {
		t.Fatalf("default catalog: exit %d, want %d (forge is not Starter)\n%s%s", code, ExitInvalid, out, errOut)
	}
	if code, out, errOut := runValidate(t, "--catalog", filepath.Join(dir, "catalog.yaml"), filepath.Join(dir, "t")); code != ExitOK {
		t.Fatalf("replacement catalog: exit %d\n%s%s", code, out, errOut)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestValidateRefusesPinsThatDoNotExist: a pin to a chart version the chart source does
// not offer passed validate and render before, and failed only in helm-controller ("no
// 'eva-itsm' chart with version matching 'v0.7.3'"). It is refused at its line.
func TestValidateRefusesPinsThatDoNotExist(t *testing.T) {
	tenant := tenantWith("PINNED", "Customer", "  versions:\n    itsm: v0.7.3\n")
	dir := writeFiles(t, map[string]string{"PINNED.yaml": tenant})
	file := filepath.Join(dir, "PINNED.yaml")
	code, out, errOut := runValidate(t, "--charts=../../charts", "--overlays=../../overlays", file)
	if code != ExitInvalid {
		t.Fatalf("exit status %d\n%s%s", code, out, errOut)
	}
	want := file + ":9:11: spec.versions[itsm]: module itsm: chart eva-itsm has no version v0.7.3"
	if !strings.HasPrefix(out, want) {
		t.Fatalf("output:\n got %q\nwant prefix %q", out, want)
	}
	// The same file pinning the version that exists is valid.
	ok := writeFiles(t, map[string]string{"PINNED.yaml": strings.Replace(tenant, "v0.7.3", "v1.2.0", 1)})
	if code, out, errOut := runValidate(t, "--charts=../../charts", "--overlays=../../overlays", ok); code != ExitOK {
		t.Fatalf("exit status %d\n%s%s", code, out, errOut)
	}
}

// TestValidateRefusesSecretsTheEnvironmentCannotDecrypt: an encrypted Secret written by
// sops for a key the environment does not list for its tenant is refused at its file,
// before anything is published (the tenant's decryption Secret could not read it);
// encrypted for the tenant's recipient, it passes.
func TestValidateRefusesSecretsTheEnvironmentCannotDecrypt(t *testing.T) {
	foreign, err := os.ReadFile(filepath.Join(repoRoot, "internal", "tenantfile", "testdata", exampleSecret))
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"--overlays", filepath.Join(repoRoot, "overlays"), "--env", "dev", "--verify-charts=false"}
	dir := writeFiles(t, map[string]string{"ACMECO.yaml": validTenant, exampleSecret: string(foreign)})
	code, out, _ := runValidate(t, append([]string{dir}, env...)...)
	want := filepath.Join(dir, exampleSecret) + ":1:1: sops.age: environment dev: not encrypted for any age recipient of tenant ACMECO"
	if code != ExitInvalid || !strings.Contains(out, want) {
		t.Fatalf("exit %d, output:\n%s\nwant %q", code, out, want)
	}
	dir = writeFiles(t, map[string]string{"ACMECO.yaml": validTenant})
	if code, out, _ := runValidate(t, append([]string{dir}, env...)...); code != ExitOK {
		t.Fatalf("the example's Secret, encrypted for dev: exit %d\n%s", code, out)
	}
}

// TestValidateRefusesAnotherTenantsCiphertext is the replay of issue 32: GLOBEX's
// shipped Secret file, copied as ACMECO's with only its name and namespace changed
// (kustomize-controller does not check the SOPS MAC), is refused at its file: it is
// encrypted for GLOBEX's key, which ACMECO's Kustomization does not hold. Before each
// tenant had keys of its own, every file was encrypted for the environment's one key and
// the copy validated.
func TestValidateRefusesAnotherTenantsCiphertext(t *testing.T) {
	stolen, err := os.ReadFile(filepath.Join(repoRoot, "tenants", "GLOBEX.gateway-tls.sops.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	copied := strings.NewReplacer("globex-gateway-tls", "acmeco-stolen", "eva-tenant-globex", "eva-tenant-acmeco").Replace(string(stolen))
	dir := writeFiles(t, map[string]string{"ACMECO.yaml": validTenant, "ACMECO.stolen.sops.yaml": copied})
	code, out, _ := runValidate(t, dir, "--overlays", filepath.Join(repoRoot, "overlays"), "--env", "dev", "--verify-charts=false")
	want := filepath.Join(dir, "ACMECO.stolen.sops.yaml") + ":1:1: sops.age: environment dev: encrypted for age1"
	if code != ExitInvalid || !strings.Contains(out, want) || !strings.Contains(out, "a recipient of tenant GLOBEX") {
		t.Fatalf("exit %d, output:\n%s\nwant %q ... a recipient of tenant GLOBEX", code, out, want)
	}
}

// TestEnvironmentReservesCodes: an environment may reserve capsule codes beyond the
// built-in list (reservedCodes: the labels of its own services under its domain).
// validate refuses an Active tenant of such a code at its capsuleCode line, and render
// refuses to render it: its host would answer for the platform's service.
func TestEnvironmentReservesCodes(t *testing.T) {
	overlays := devOverlaysWith(t, "reservedCodes: [ACMECO]\n")
	dir := writeFiles(t, map[string]string{"ACMECO.yaml": validTenant})
	code, out, _ := runValidate(t, dir, "--overlays", overlays, "--env", "dev", "--verify-charts=false")
	want := filepath.Join(dir, "ACMECO.yaml") + ":6:16: spec.capsuleCode: capsule code ACMECO is reserved in environment dev"
	if code != ExitInvalid || !strings.Contains(out, want) {
		t.Fatalf("validate: exit %d, output:\n%s\nwant %q", code, out, want)
	}
	code, _, stderr := runCLI(t, "render", "--tenants", dir, "--overlays", overlays, "--env", "dev", "--out", t.TempDir(), "--verify-charts=false")
	if code == ExitOK || !strings.Contains(stderr, "capsule code ACMECO is reserved in environment dev") {
		t.Fatalf("render: exit %d, stderr:\n%s", code, stderr)
	}
}

// TestValidateRefusesAnEnvironmentItCannotLoad: --env names the environment to check
// against; one that does not load (a setting this evactl does not know) is a problem
// of its file, at its line, with the name it was meant to be, never a silent skip of
// its checks.
func TestValidateRefusesAnEnvironmentItCannotLoad(t *testing.T) {
	overlays := devOverlaysWith(t, "reservedCodez: [ACMECO]\n")
	envFile := filepath.Join(overlays, "dev", "tenant", "environment.yaml")
	data, _ := os.ReadFile(envFile)
	line := strings.Count(string(data), "\n")
	dir := writeFiles(t, map[string]string{"ACMECO.yaml": validTenant})
	code, stdout, stderr := runValidate(t, dir, "--overlays", overlays, "--env", "dev", "--verify-charts=false")
	want := fmt.Sprintf("%s:%d:1: reservedCodez: unknown field (did you mean \"reservedCodes\"?)", envFile, line)
	if code != ExitInvalid || !strings.Contains(stdout, want) {
		t.Fatalf("exit %d, want %d and %s; stdout:\n%s\nstderr:\n%s", code, ExitInvalid, want, stdout, stderr)
	}
}

// TestValidateChecksTheFleetsEnvironment: in a fleet made by init, validate with no
// flags checks overlays/dev/tenant/environment.yaml as it checks tenant files, and
// render says the same at the same line. Seen failing before: a misspelt domain passed
// validate (exit 0, the chart check run in a built-in environment) while render failed
// with a JSON error and no line.
func TestValidateChecksTheFleetsEnvironment(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	home := t.TempDir()
	t.Chdir(home)
	if code, out := runEvactl(t, "init", "fleet", "--domain", "dev.acme.test", "--owners", "@acme/platform"); code != ExitOK {
		t.Fatalf("init: exit %d\n%s", code, out)
	}
	t.Chdir(filepath.Join(home, "fleet"))
	envFile := filepath.Join("overlays", "dev", "tenant", "environment.yaml")
	data, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	at := strings.Index(string(data), "\ndomain:")
	if at < 0 {
		t.Fatalf("no domain in %s:\n%s", envFile, data)
	}
	line := strings.Count(string(data[:at+1]), "\n") + 1
	if err := os.WriteFile(envFile, []byte(strings.Replace(string(data), "\ndomain:", "\ndomian:", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%s:%d:1: domian: unknown field (did you mean \"domain\"?)", envFile, line)
	if code, out := runEvactl(t, "validate"); code != ExitInvalid || !strings.Contains(out, want) {
		t.Fatalf("validate: exit %d, want %d and %s:\n%s", code, ExitInvalid, want, out)
	}
	if code, out := runEvactl(t, "render", "--out", filepath.Join(t.TempDir(), "out"), "--git=false", "-q"); code == ExitOK || !strings.Contains(out, want) {
		t.Fatalf("render: exit %d, want %s:\n%s", code, want, out)
	}
}

// devOverlaysWith is a copy of the repository's overlays whose dev environment.yaml ends
// with extra.
func devOverlaysWith(t *testing.T, extra string) string {
	t.Helper()
	overlays := copyDir(t, filepath.Join(repoRoot, "overlays"))
	envFile := filepath.Join(overlays, "dev", "tenant", "environment.yaml")
	data, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(envFile, append(data, extra...), 0o644); err != nil {
		t.Fatal(err)
	}
	return overlays
}

// TestValidateReadsStandardInput: "-" validates one tenant piped in, with its problems
// at <stdin>:line:col; "-" with other paths is a usage error.
func TestValidateReadsStandardInput(t *testing.T) {
	good, err := os.ReadFile(filepath.Join(repoRoot, "tenants", "DEVUSR.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(stdin string, args ...string) (int, string) {
		var out bytes.Buffer
		cmd := NewRootCommand()
		cmd.SetArgs(append([]string{"validate", "--verify-charts=false"}, args...))
		cmd.SetIn(strings.NewReader(stdin))
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		err := cmd.Execute()
		var exit *ExitError
		switch {
		case err == nil:
			return ExitOK, out.String()
		case errors.As(err, &exit):
			return exit.Code, out.String() + err.Error()
		}
		return -1, out.String() + err.Error()
	}
	if code, out := run(string(good), "-"); code != ExitOK {
		t.Errorf("a valid tenant on stdin: exit %d\n%s", code, out)
	}
	bad := strings.Replace(string(good), "tier: Starter", "tier: Gold", 1)
	if code, out := run(bad, "-"); code != ExitInvalid || !strings.Contains(out, "<stdin>:") || !strings.Contains(out, "spec.tier") {
		t.Errorf("an invalid tenant on stdin: exit %d, want %d and <stdin>:line:col: spec.tier\n%s", code, ExitInvalid, out)
	}
	if code, out := run(bad, "-", "-o", "yaml"); code != ExitInvalid || !strings.Contains(out, "valid: false") || !strings.Contains(out, "field: spec.tier") {
		t.Errorf("validate -o yaml: exit %d\n%s", code, out)
	}
	if code, out := run(string(good), "-", "tenants"); code != ExitUsage || !strings.Contains(out, "name no other paths with it") {
		t.Errorf("- with a path: exit %d\n%s", code, out)
	}
}
