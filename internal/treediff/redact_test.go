package treediff

import (
	"slices"
	"strings"
	"testing"
)

// fakeSecrets flags password keys, credentials holding text, and PEM or AKIA values.
func fakeSecrets(key string, value any) string {
	switch x := value.(type) {
	case string:
		if strings.Contains(x, "PRIVATE KEY") {
			return "PEM private key"
		}
		if strings.HasPrefix(x, "AKIA") {
			return "AWS access key"
		}
		if key == "password" {
			return "password-like key"
		}
	case int64, float64:
		if key == "password" {
			return "password-like key holding a number"
		}
	case map[string]any:
		if key == "credentials" && len(x) > 0 {
			return "credentials"
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if r := fakeSecrets(k, x[k]); r != "" {
				return r
			}
		}
	case []any:
		if key == "credentials" && len(x) > 0 {
			return "credentials-list"
		}
		for _, v := range x {
			if r := fakeSecrets(key, v); r != "" {
				return r
			}
		}
	}
	return ""
}

func TestRedact(t *testing.T) {
	cases := map[string]struct{ in, want string }{
		"number under a password key": {
			"spec:\n  values:\n    password: 84736251\n    replicaCount: 2\n",
			"spec:\n  values:\n    password: <redacted: password-like key holding a number>\n    replicaCount: 2\n",
		},
		"pem block scalar": {
			"tls:\n  key: |\n    -----BEGIN RSA PRIVATE KEY-----\n    MIIEow\n    -----END RSA PRIVATE KEY-----\n  cert: ok\n",
			"tls:\n  key: <redacted: PEM private key>\n  cert: ok\n",
		},
		"one secret does not hide its siblings": {
			"values:\n  aws:\n    id: AKIAIOSFODNN7EXAMPLE\n    region: eu-west-1\n  replicaCount: 1\n",
			"values:\n  aws:\n    id: <redacted: AWS access key>\n    region: eu-west-1\n  replicaCount: 1\n",
		},
		"container flagged by its key": {
			"credentials:\n  user: admin\n  host: db\nother: 1\n",
			"credentials: <redacted: credentials>\nother: 1\n",
		},
		"list items": {
			"args:\n  - --verbose\n  - AKIAIOSFODNN7EXAMPLE\n  - --x\n",
			"args:\n  - --verbose\n  - <redacted: AWS access key>\n  - --x\n",
		},
		"list of maps": {
			"env:\n- name: A\n  value: AKIAIOSFODNN7EXAMPLE\n- name: B\n  value: b\n",
			"env:\n- name: A\n  value: <redacted: AWS access key>\n- name: B\n  value: b\n",
		},
		"flow mapping": {
			"db: {user: x, password: hunter2}\nz: 1\n",
			"db: <redacted: password-like key>\nz: 1\n",
		},
		"quoted multi-line": {
			"a:\n  password: \"hunter2\n    more\"\n  b: 1\n",
			"a:\n  password: <redacted: password-like key>\n  b: 1\n",
		},
		"several documents": {
			"a: 1\n---\nb:\n  password: x\n---\nc: 2\n",
			"a: 1\n---\nb:\n  password: <redacted: password-like key>\n---\nc: 2\n",
		},
		"not yaml: line by line": {
			"a: [\npassword: hunter2\n-----BEGIN RSA PRIVATE KEY-----\n",
			"a: [\npassword: <redacted: password-like key>\n<redacted: PEM private key>\n",
		},
		"terminal escapes": {
			"banner: \"\\e[2J\"\nraw: a\x1b[31mb\n",
			"banner: \"\\e[2J\"\nraw: a\\x1b[31mb\n",
		},
		"list at the key's indentation flagged as a whole": {
			"credentials:\n- user\n- admin\nnext: 1\n",
			"credentials: <redacted: credentials-list>\nnext: 1\n",
		},
		"two secrets on one flow line": {
			"db: {password: hunter2, key: AKIAIOSFODNN7EXAMPLE}\n",
			"db: <redacted: AWS access key>\n",
		},
		"nothing to redact": {"a: 1\nb: [x, y]\n", "a: 1\nb: [x, y]\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := string(Redact([]byte(tc.in), fakeSecrets)); got != tc.want {
				t.Errorf("Redact:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestCompareNeverShowsRedactedValues(t *testing.T) {
	tenantOf := func(p string) string {
		if rest, ok := strings.CutPrefix(p, "tenants/"); ok {
			return strings.Split(rest, "/")[0]
		}
		return ""
	}
	old := map[string][]byte{
		"tenants/acmeco/manifests.yaml":   []byte("spec:\n  values:\n    password: 84736251\n    replicaCount: 1\n"),
		"tenants/globex/manifests.yaml":   []byte("spec:\n  values:\n    password: 11112222\n"),
		"tenants/x\x1b[2J/manifests.yaml": []byte("a: 1\n"),
	}
	new := map[string][]byte{
		"tenants/acmeco/manifests.yaml": []byte("spec:\n  values:\n    replicaCount: 2\n"),
		"tenants/globex/manifests.yaml": []byte("spec:\n  values:\n    password: 33334444\n"),
	}
	r := Compare(old, new, tenantOf, fakeSecrets)
	var all strings.Builder
	for _, f := range r.Files {
		all.WriteString(f.Path + "\n" + f.Diff)
	}
	all.WriteString(strings.Join(r.Removed, ","))
	text := all.String()
	for _, secret := range []string{"84736251", "11112222", "33334444", "\x1b"} {
		if strings.Contains(text, secret) {
			t.Errorf("the diff shows %q:\n%s", secret, text)
		}
	}
	if strings.Join(r.Changed, ",") != "ACMECO,GLOBEX" {
		t.Errorf("changed = %v (a change of a secret alone is still a change)", r.Changed)
	}
	if !strings.Contains(text, "only redacted values differ") || !strings.Contains(text, "-    password: <redacted: password-like key holding a number>") {
		t.Errorf("diff:\n%s", text)
	}
}

// FuzzRedact: any input, YAML or not, gives printable lines, and a value holding the
// marker never survives when it is a plain scalar under a key.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{"a: 1\n", "password: x\n", "a:\n  - b\n  - c\n", "a: |\n  x\n", "{a: [b, {c: d}]}\n", "a: [\n", "- x\n- y\n"} {
		f.Add(s, "s3cr3t")
	}
	marker := "zz9marker"
	redact := func(key string, value any) string {
		if s, ok := value.(string); ok && strings.Contains(s, marker) {
			return "marker"
		}
		if m, ok := value.(map[string]any); ok {
			for k, v := range m {
				if r := fakeSecrets(k, v); r != "" {
					return r
				}
			}
		}
		return ""
	}
	f.Fuzz(func(t *testing.T, doc, value string) {
		out := string(Redact([]byte(doc), redact))
		for _, r := range out {
			if r != '\n' && (r < 0x20 || r == 0x7f) {
				t.Fatalf("control character %U in %q", r, out)
			}
		}
		// Planted as a plain scalar under a fresh key at the end of a valid mapping.
		if strings.ContainsAny(value, "\n\r:#{}[],&*!|>'\"%@`-?") || strings.TrimSpace(value) != value || value == "" {
			return
		}
		planted := "k: 1\nplanted: " + marker + value + "\n"
		if got := string(Redact([]byte(planted), redact)); strings.Contains(got, marker) {
			t.Fatalf("marker shown: %q", got)
		}
	})
}
