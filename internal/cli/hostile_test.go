package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode"
)

// withValues returns validTenant with extra lines (indented for the crm values) after
// "replicaCount: 2", which is line 14: the first extra line is line 15.
func withValues(extra string) string {
	return strings.Replace(validTenant, "      replicaCount: 2\n", "      replicaCount: 2\n"+extra, 1)
}

// replaced returns validTenant with one string replaced.
func replaced(old, new string) string { return strings.Replace(validTenant, old, new, 1) }

// withMeta adds lines under metadata (after "name: acmeco", line 4): the first is line 5.
func withMeta(extra string) string { return replaced("  name: acmeco\n", "  name: acmeco\n"+extra) }

// hostileCase is one hostile tenant folder and the problem validate must report.
type hostileCase struct {
	files map[string]string
	setup func(t *testing.T, dir string) // for what files cannot express (links, FIFOs)
	file  string                         // base name of the reported file
	line  int
	field string
	text  string
	// never lists strings no output may contain (a symlink target's content).
	never []string
}

func hostileCases() map[string]hostileCase {
	acme := func(content string) map[string]string { return map[string]string{"ACMECO.yaml": content} }
	huge := strings.Repeat("A", 200_000)
	return map[string]hostileCase{
		// Section 2: the ten secret forms that passed the validator.
		"secret: number under password": {files: acme(withValues("      password: 84736251\n")),
			file: "ACMECO.yaml", line: 15, field: "spec.helmValues[crm].password", text: "looks like a secret"},
		"secret: dbPass": {files: acme(withValues("      dbPass: Tr0ub4dor3xyz\n")),
			file: "ACMECO.yaml", line: 15, field: "spec.helmValues[crm].dbPass", text: "looks like a secret"},
		"secret: pass_word": {files: acme(withValues("      pass_word: Tr0ub4dor3xyz\n")),
			file: "ACMECO.yaml", line: 15, field: "spec.helmValues[crm].pass_word", text: "looks like a secret"},
		"secret: passWd": {files: acme(withValues("      passWd: Tr0ub4dor3xyz\n")),
			file: "ACMECO.yaml", line: 15, field: "spec.helmValues[crm].passWd", text: "looks like a secret"},
		"secret: URL with credentials": {files: acme(withValues("      upstream: https://admin:Sup3rS3cret@db.example.com/crm\n")),
			file: "ACMECO.yaml", line: 15, field: "spec.helmValues[crm].upstream", text: "URL with credentials"},
		"secret: AWS key id under aws.id": {files: acme(withValues("      aws:\n        id: AKIAIOSFODNN7EXAMPLE\n        region: eu-west-1\n")),
			file: "ACMECO.yaml", line: 16, field: "spec.helmValues[crm].aws.id", text: "AWS access key"},
		"secret: AWS secret under aws.key": {files: acme(withValues("      aws:\n        key: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n")),
			file: "ACMECO.yaml", line: 16, field: "spec.helmValues[crm].aws.key", text: "looks like a secret"},
		"secret: JWT under auth.bearer": {files: acme(withValues("      auth:\n        bearer: eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c\n")),
			file: "ACMECO.yaml", line: 16, field: "spec.helmValues[crm].auth.bearer", text: "looks like a secret"},
		"secret: PEM key under tls.key": {files: acme(withValues("      tls:\n        key: |\n          -----BEGIN RSA PRIVATE KEY-----\n          MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw\n          -----END RSA PRIVATE KEY-----\n")),
			file: "ACMECO.yaml", line: 16, field: "spec.helmValues[crm].tls.key", text: "PEM private key"},
		"secret: literal under a File name": {files: acme(withValues("      passwordFile: Tr0ub4dor3xyz\n")),
			file: "ACMECO.yaml", line: 15, field: "spec.helmValues[crm].passwordFile", text: "not a path"},
		"secret: literal under a Path name": {files: acme(withValues("      tokenPath: ghp_16C7e42F292c6912E7710c838347Ae178B4a\n")),
			file: "ACMECO.yaml", line: 15, field: "spec.helmValues[crm].tokenPath", text: "looks like a secret"},
		"secret: base64 blob under data": {files: acme(withValues("      data: c2VjcmV0LXZhbHVlLXRoYXQtaXMtbG9uZy1lbm91Z2gtdG8tbWF0dGVyLXhZ\n")),
			file: "ACMECO.yaml", line: 15, field: "spec.helmValues[crm].data", text: "looks like a secret"},
		"secret: Cyrillic a in password": {files: acme(withValues("      p\u0430ssword: Tr0ub4dor3xyz\n")),
			file: "ACMECO.yaml", line: 15, field: "spec.helmValues[crm].p\u0430ssword", text: "looks like a secret"},

		// Section 3: foreign images.
		"image repository override": {files: acme(withValues("      image:\n        repository: evil.example.com/x\n        tag: latest\n")),
			file: "ACMECO.yaml", line: 15, field: "spec.helmValues[crm].image", text: "platform-owned"},

		// Section 5: symbolic links, special and huge files.
		"symlink to /etc/passwd": {
			setup: func(t *testing.T, dir string) { symlink(t, "/etc/passwd", filepath.Join(dir, "ABCDEF.yaml")) },
			file:  "ABCDEF.yaml", line: 1, text: "outside the tenant folder: refused without reading it", never: []string{"root:", "/etc/passwd"}},
		"symlink out of the folder by ..": {
			setup: func(t *testing.T, dir string) {
				outside := filepath.Join(filepath.Dir(dir), "outside-secret.yaml")
				if err := os.WriteFile(outside, []byte(validTenant+"# TOPSECRET\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				symlink(t, "../"+filepath.Base(outside), filepath.Join(dir, "ACMECO.yaml"))
			},
			file: "ACMECO.yaml", line: 1, text: "outside the tenant folder", never: []string{"TOPSECRET", "outside-secret"}},
		"symlink inside the folder": {
			files: map[string]string{"real/tenant.txt": validTenant},
			setup: func(t *testing.T, dir string) { symlink(t, "real/tenant.txt", filepath.Join(dir, "ACMECO.yaml")) },
			file:  "ACMECO.yaml", line: 1, text: "must be regular files"},
		"hard link to a file outside": {
			setup: func(t *testing.T, dir string) {
				outside := filepath.Join(t.TempDir(), "outside-secret.yaml")
				if err := os.WriteFile(outside, []byte(validTenant+"# TOPSECRET\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Link(outside, filepath.Join(dir, "ACMECO.yaml")); err != nil {
					t.Skip("no hard links across these folders:", err)
				}
			},
			file: "ACMECO.yaml", line: 1, text: "a hard link (2 links)", never: []string{"TOPSECRET"}},
		"named pipe": {
			setup: func(t *testing.T, dir string) {
				if err := syscall.Mkfifo(filepath.Join(dir, "ACMECO.yaml"), 0o644); err != nil {
					t.Skip("no FIFOs here:", err)
				}
			},
			file: "ACMECO.yaml", line: 1, text: "not a regular file"},
		"file over 256 KiB": {files: acme(validTenant + "# " + strings.Repeat("x", 300_000) + "\n"),
			file: "ACMECO.yaml", line: 1, text: "a tenant file may be at most 262144"},

		// Injected key names and terminal escapes.
		"key name injecting a workflow command": {files: acme(withValues("      \"password\\n::warning file=evil::pwned\": Tr0ub4dor3xyz\n")),
			file: "ACMECO.yaml", line: 15, field: `spec.helmValues[crm].password\n::warning file=evil::pwned`, text: "looks like a secret"},
		"unknown field named with ANSI escapes": {files: acme(validTenant + "\"\\e[2J\\e[31mowned\": 1\n"),
			file: "ACMECO.yaml", line: 21, field: `\x1b[2J\x1b[31mowned`, text: "unknown field"},
		"key name with a carriage return": {files: acme(replaced("  wave: 2\n", "  wave: 2\n  \"wav\\re\": 1\n")),
			file: "ACMECO.yaml", line: 9, field: `spec.wav\re`, text: "unknown field"},
		"bidi override in a capsule code": {files: acme(replaced("capsuleCode: ACMECO", "capsuleCode: \"ACM\\u202eECO\"")),
			file: "ACMECO.yaml", line: 6, field: "spec.capsuleCode", text: `"ACM\u202eECO"`},
		"invalid UTF-8": {files: acme(replaced("tier: Customer", "tier: Cust\xffomer")),
			file: "ACMECO.yaml", line: 7, text: "invalid YAML"},

		// Huge scalars are shortened in messages.
		"200 KB capsule code": {files: acme(replaced("capsuleCode: ACMECO", "capsuleCode: "+huge)),
			file: "ACMECO.yaml", line: 6, field: "spec.capsuleCode", text: "… (200000 bytes)"},
		"200 KB object name": {files: acme(replaced("name: acmeco", "name: "+strings.ToLower(huge))),
			file: "ACMECO.yaml", line: 4, field: "metadata.name", text: "(200000 bytes)"},
		"200 KB version pin": {files: acme(replaced("crm: 1.4.0", "crm: \"1.4.0 "+huge+"\"")),
			file: "ACMECO.yaml", line: 11, field: "spec.versions[crm]", text: "(200006 bytes)"},
		"200 KB key name": {files: acme(validTenant + "  ? " + huge + "\n  : 1\n"),
			file: "ACMECO.yaml", line: 21, text: "unknown field", field: "spec." + strings.Repeat("A", 251) + "… (200005 bytes)"},

		// YAML tags and numbers that only failed in render.
		"custom tag on a value": {files: acme(replaced("replicaCount: 2", "replicaCount: !vault secret/x")),
			file: "ACMECO.yaml", line: 14, field: "spec.helmValues[crm].replicaCount", text: "YAML tag !vault is not supported"},
		"custom tag on a mapping": {files: acme(withValues("      db: !secret {host: x}\n")),
			file: "ACMECO.yaml", line: 15, field: "spec.helmValues[crm].db", text: "YAML tag !secret"},
		"custom tag on a spec field": {files: acme(replaced("tier: Customer", "tier: !enum Customer")),
			file: "ACMECO.yaml", line: 7, field: "spec.tier", text: "YAML tag !enum"},
		"binary tag": {files: acme(withValues("      blob: !!binary aGVsbG8=\n")),
			file: "ACMECO.yaml", line: 15, field: "spec.helmValues[crm].blob", text: "YAML tag !!binary"},
		"40-digit number": {files: acme(replaced("replicaCount: 2", "replicaCount: 1234567890123456789012345678901234567890")),
			file: "ACMECO.yaml", line: 14, field: "spec.helmValues[crm].replicaCount", text: "does not fit in 64 bits"},
		"negative 40-digit number": {files: acme(withValues("      offset: -1234567890123456789012345678901234567890\n")),
			file: "ACMECO.yaml", line: 15, field: "spec.helmValues[crm].offset", text: "does not fit in 64 bits"},
		"infinite number": {files: acme(withValues("      ratio: .inf\n")),
			file: "ACMECO.yaml", line: 15, field: "spec.helmValues[crm].ratio", text: "no JSON form"},

		// The CRD and evactl agree.
		"wave 0": {files: acme(replaced("wave: 2", "wave: 0")),
			file: "ACMECO.yaml", line: 8, field: "spec.wave", text: "leave wave out for the default 1"},
		"wave 00": {files: acme(replaced("wave: 2", "wave: 00")),
			file: "ACMECO.yaml", line: 8, field: "spec.wave", text: "must be 1 (internal)"},

		// Server-set and platform metadata.
		"finalizers":        metaCase("  finalizers: [example.com/hold]\n", "metadata.finalizers", "finalizers are managed by the operator"),
		"ownerReferences":   metaCase("  ownerReferences:\n  - {apiVersion: v1, kind: Namespace, name: kube-system, uid: x}\n", "metadata.ownerReferences", "ownerReferences are managed"),
		"managedFields":     metaCase("  managedFields: []\n", "metadata.managedFields", "set by the API server"),
		"uid":               metaCase("  uid: 7c3a0c1e-0000-4000-8000-000000000000\n", "metadata.uid", "set by the API server"),
		"resourceVersion":   metaCase("  resourceVersion: \"42\"\n", "metadata.resourceVersion", "set by the API server"),
		"generation":        metaCase("  generation: 3\n", "metadata.generation", "set by the API server"),
		"creationTimestamp": metaCase("  creationTimestamp: \"2026-01-01T00:00:00Z\"\n", "metadata.creationTimestamp", "set by the API server"),
		"deletionTimestamp": metaCase("  deletionTimestamp: \"2026-01-01T00:00:00Z\"\n", "metadata.deletionTimestamp", "set by the API server"),
		"selfLink":          metaCase("  selfLink: /apis/x\n", "metadata.selfLink", "set by the API server"),
		"status": {files: acme(validTenant + "status:\n  phase: Active\n"),
			file: "ACMECO.yaml", line: 21, field: "status", text: "written by the operator"},
		"operator-version annotation": metaCase6("  annotations:\n    eva.aidonow.com/operator-version: \"9.9.9\"\n",
			"metadata.annotations[eva.aidonow.com/operator-version]", "reserved: only the platform sets"),
		"seed-loaded annotation": metaCase6("  annotations:\n    eva.aidonow.com/seed-loaded: seeds-1.0.0\n",
			"metadata.annotations[eva.aidonow.com/seed-loaded]", "reserved"),
		"platform label": metaCase6("  labels:\n    eva.aidonow.com/capsule: GLOBEX\n",
			"metadata.labels[eva.aidonow.com/capsule]", "reserved"),
		"platform label under a subdomain": metaCase6("  labels:\n    wave.eva.aidonow.com/x: \"1\"\n",
			"metadata.labels[wave.eva.aidonow.com/x]", "reserved"),

		// Values references, mounted Secrets and pins: valuesFrom is refused wherever it
		// writes (helm-controller parses the value as --set input), the values key
		// secretMounts is Eva's, and a mount names only the tenant's own Secrets.
		"valuesFrom into capsule identity": {files: acme(validTenant + "  valuesFrom:\n    - module: crm\n      kind: Secret\n      name: acmeco-crm-database\n      valuesKey: password\n      targetPath: capsule.code\n"),
			file: "ACMECO.yaml", line: 22, field: "spec.valuesFrom[0]", text: "valuesFrom is refused: helm-controller parses a referenced value as Helm --set input"},
		"valuesFrom merging a whole document": {files: acme(validTenant + "  valuesFrom:\n    - module: crm\n      kind: ConfigMap\n      name: acmeco-crm-values\n"),
			file: "ACMECO.yaml", line: 22, field: "spec.valuesFrom[0]", text: "valuesFrom is refused"},
		"secretMounts set in helmValues": {files: acme(withValues("      secretMounts:\n        - name: db\n          secretName: globex-gateway-tls\n")),
			file: "ACMECO.yaml", line: 15, field: "spec.helmValues[crm].secretMounts", text: "platform-owned", never: []string{"globex-gateway-tls"}},
		"secretMounts naming another tenant's Secret": {files: acme(replaced("secret: crm-database", "secret: globex-gateway-tls")),
			file: "ACMECO.yaml", line: 20, field: "spec.secretMounts[0].secret", text: "no encrypted Secret provides acmeco-globex-gateway-tls"},
		"secretMounts path out of the folder": {files: acme(replaced("secret: crm-database", "secret: ../../globex/crm-database")),
			file: "ACMECO.yaml", line: 20, field: "spec.secretMounts[0].secret", text: "must be the name of one of spec.secrets"},
		"pin 1.0.0-01": {files: acme(replaced("crm: 1.4.0", "crm: 1.0.0-01")),
			file: "ACMECO.yaml", line: 11, field: "spec.versions[crm]", text: "semantic version"},

		// What render refused without a position: the chart schemas.
		"chart schema enum": {files: acme(withValues("      logLevel: chatty\n")),
			file: "ACMECO.yaml", line: 15, field: "spec.helmValues[crm].logLevel", text: "refused by chart eva-crm"},
		"chart schema maximum": {files: acme(withValues("      containerPort: 70000\n")),
			file: "ACMECO.yaml", line: 15, field: "spec.helmValues[crm].containerPort", text: "maximum"},
		"chart schema type": {files: acme(withValues("      logLevel: 3\n")),
			file: "ACMECO.yaml", line: 15, field: "spec.helmValues[crm].logLevel", text: "want string"},
	}
}

func metaCase(lines, fieldPath, text string) hostileCase {
	return hostileCase{files: map[string]string{"ACMECO.yaml": withMeta(lines)}, file: "ACMECO.yaml", line: 5, field: fieldPath, text: text}
}

// metaCase6 is a metadata case whose key sits under labels or annotations (line 6).
func metaCase6(lines, fieldPath, text string) hostileCase {
	c := metaCase(lines, fieldPath, text)
	c.line = 6
	return c
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skip("no symbolic links here:", err)
	}
}

func TestHostileTenantFiles(t *testing.T) {
	cases := hostileCases()
	if len(cases) < 40 {
		t.Fatalf("only %d hostile files; the suite must keep at least 40", len(cases))
	}
	charts := []string{"--charts", filepath.Join(repoRoot, "charts"), "--overlays", filepath.Join(repoRoot, "overlays")}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := writeFiles(t, tc.files)
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			code, out, errOut := runValidate(t, append(append([]string{"--output", "json"}, charts...), dir)...)
			if code != ExitInvalid {
				t.Fatalf("exit status %d, want %d\nstdout: %s\nstderr: %s", code, ExitInvalid, clip(out), clip(errOut))
			}
			var report struct {
				Problems []struct {
					File, Field, Message string
					Line, Column         int
				}
			}
			if err := json.Unmarshal([]byte(out), &report); err != nil {
				t.Fatalf("json output: %v\n%s", err, clip(out))
			}
			found := false
			for _, p := range report.Problems {
				if filepath.Base(p.File) == tc.file && p.Line == tc.line && p.Column >= 1 && p.Field == tc.field && strings.Contains(p.Message, tc.text) {
					found = true
				}
			}
			if !found {
				t.Errorf("no problem %s:%d: %s: %q among:\n%s", tc.file, tc.line, clip(tc.field), tc.text, clip(out))
			}
			// Every format: one line per problem, printable, bounded, and nothing the
			// file should not have let through.
			for _, format := range []string{"text", "json", "github"} {
				_, out, errOut := runValidate(t, append(append([]string{"--output", format}, charts...), dir)...)
				checkSafeOutput(t, format, dir, out+errOut, len(report.Problems), tc.never)
			}
		})
	}
}

// checkSafeOutput asserts what every output format must hold for hostile input.
func checkSafeOutput(t *testing.T, format, dir, out string, problems int, never []string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for _, l := range lines {
		for _, r := range l {
			if !unicode.IsPrint(r) && r != '\t' {
				t.Errorf("%s output holds %U: %q", format, r, clip(l))
				break
			}
		}
		if len(l) > 2048 {
			t.Errorf("%s output line of %d bytes", format, len(l))
		}
		switch format {
		case "text":
			if !strings.HasPrefix(l, dir) && !strings.Contains(l, "problem(s) in") {
				t.Errorf("text output line not starting with a file: %q", clip(l))
			}
		case "github":
			if !strings.HasPrefix(l, "::error file=") && !strings.Contains(l, "problem(s) in") {
				t.Errorf("github output line not an annotation: %q", clip(l))
			}
		}
	}
	if format != "json" && len(lines) != problems+1 {
		t.Errorf("%s output has %d lines for %d problems:\n%s", format, len(lines), problems, clip(out))
	}
	if strings.Contains(out, strings.Repeat("A", safetextMax+1)) || strings.Contains(out, strings.Repeat("x", safetextMax+1)) {
		t.Errorf("%s output echoes a long value whole", format)
	}
	for _, s := range never {
		if strings.Contains(out, s) {
			t.Errorf("%s output shows %q", format, s)
		}
	}
}

// safetextMax is the longest run of one value a message may show: 64 characters of a
// value, or the longer bound of a field path.
const safetextMax = 256

func clip(s string) string {
	if len(s) > 3000 {
		return s[:3000] + "…"
	}
	return s
}
