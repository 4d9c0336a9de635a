package tenant

import (
	"encoding/json"
	"math"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation"
)

// SecretReason returns a short reason ("looks like a JWT", "password-like key holding a
// number") when value, written under key in Helm values, would be refused as a secret,
// and "" when it would not. value is what encoding/json decodes into any: a string, a
// number, a bool, nil, or a map or list searched recursively. The reason never contains
// the value, so it can go into error messages, logs and diffs. evactl diff redacts every
// value for which it returns a reason.
func SecretReason(key string, value any) string {
	reason, descend := judge(key, value)
	if reason != "" || !descend {
		return reason
	}
	switch x := value.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if r := SecretReason(k, x[k]); r != "" {
				return r
			}
		}
	case []any:
		for _, item := range x {
			// A list's items stand under the list's key: passwords: [a, b] holds passwords.
			if r := SecretReason(key, item); r != "" {
				return r
			}
		}
	}
	return ""
}

// judge decides about the value directly under key: the reason it is a secret, or
// whether its children (of a map or list) still need looking at.
func judge(key string, value any) (reason string, descend bool) {
	info := classifyKey(key)
	switch x := value.(type) {
	case string:
		return stringReason(key, info, x), false
	case float64, json.Number, int, int32, int64:
		// A secret-named key holding a number holds a numeric password or PIN; a number
		// under an attribute of a secret (passwordMinLength, tokenTTL) is a setting.
		if info.kind == keySecret && info.headIsSecret {
			return "password-like key holding a number", false
		}
		return "", false
	case map[string]any, []any:
		if info.kind == keySecret && holdsText(x) {
			return "key names a secret and holds text", false
		}
		return "", true
	}
	return "", false // bool, nil: at most one bit, never a secret
}

func stringReason(key string, info keyInfo, s string) string {
	if s == "" {
		return ""
	}
	switch info.kind {
	case keySecret:
		return "key names a secret"
	case keySecretFile:
		if !pathShaped(s) {
			return "key names a secret file but the value is not a path"
		}
	case keySecretRef:
		if !objectNameShaped(s) {
			return "key names a secret reference but the value is not an object name"
		}
	}
	return valueReason(key, s)
}

// valueReason looks at a string for what a secret looks like, whatever its key.
func valueReason(key, s string) string {
	switch {
	case privateKeyRE.MatchString(s):
		return "looks like a PEM private key"
	case jwtRE.MatchString(s):
		return "looks like a JWT"
	case awsKeyIDRE.MatchString(s):
		// Own rule although gitleaks has one: gitleaks allowlists the documentation
		// keys (…EXAMPLE), which must not pass here either.
		return "looks like an AWS access key ID"
	}
	if r := credentialReason(s); r != "" {
		return r
	}
	if highEntropy(s) {
		return "looks like a high-entropy key or base64 blob"
	}
	return gitleaksReason(key, s)
}

var (
	privateKeyRE = regexp.MustCompile(`-----BEGIN[ A-Z0-9]*PRIVATE KEY( BLOCK)?-----`)
	jwtRE        = regexp.MustCompile(`eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`)
	awsKeyIDRE   = regexp.MustCompile(`(^|[^A-Z0-9])(AKIA|ASIA|ABIA|ACCA|AROA|AIDA|AIPA|ANPA|ANVA|A3T[A-Z0-9])[A-Z0-9]{16}([^A-Z0-9]|$)`)
	// urlRE finds scheme://authority in free text, for strings holding several URLs.
	urlRE = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)
	// userPassRE finds user:password@host without a scheme (MySQL DSNs, git remotes).
	userPassRE = regexp.MustCompile(`(^|[\s;,(])[A-Za-z0-9._%+-]+:([^@\s/]+)@[A-Za-z0-9([]`)
	// kvRE finds key=value settings in connection strings (Password=...;).
	kvRE = regexp.MustCompile(`(^|[;&?\s,])([A-Za-z][A-Za-z0-9 _.-]{0,40})=([^;&\s,]+)`)
)

// credentialReason finds credentials written into a URL or connection string:
// postgres://admin:pw@db, https://host/?token=..., user:pw@tcp(db), Password=...;.
func credentialReason(s string) string {
	for _, raw := range urlRE.FindAllString(s, 8) {
		u, err := url.Parse(raw)
		if err != nil {
			// Unparsable (a password with a stray %): judge the authority by its shape.
			authority := raw[strings.Index(raw, "://")+3:]
			if i := strings.IndexAny(authority, "/?#"); i >= 0 {
				authority = authority[:i]
			}
			if strings.Contains(authority, "@") {
				return "looks like a URL with credentials"
			}
			continue
		}
		if u.User != nil {
			if pw, ok := u.User.Password(); ok && pw != "" {
				return "looks like a URL with credentials"
			}
			// https://<token>@github.com: a token alone as the user name.
			if highEntropy(u.User.Username()) || len(u.User.Username()) >= 32 {
				return "looks like a URL with credentials"
			}
		}
		for k, vs := range u.Query() {
			if LooksLikeSecret(k) && strings.Join(vs, "") != "" {
				return "looks like a URL with a secret in its query"
			}
		}
	}
	for _, m := range userPassRE.FindAllStringSubmatchIndex(s, 8) {
		// An image reference (busybox:1.36@sha256:…) has the same shape; a digest is no secret.
		if !strings.HasPrefix(s[m[1]-1:], "sha256:") && !strings.HasPrefix(s[m[1]-1:], "sha512:") {
			return "looks like credentials in a connection string"
		}
	}
	for _, m := range kvRE.FindAllStringSubmatch(s, 32) {
		if LooksLikeSecret(strings.TrimSpace(m[2])) {
			return "looks like a connection string with a secret"
		}
	}
	return ""
}

// highEntropy reports whether s holds a token that reads like random key material:
// at least 20 characters of the base64 (or base64url) alphabet, upper and lower case
// and digits mixed, and a Shannon entropy above what words, versions, UUIDs, hex
// digests and Kubernetes names reach (measured: camelCase words with digits about 4.0,
// UUIDs 3.7, git SHAs 3.9; 20 random base64 characters 4.0–4.3, 40 about 4.7).
func highEntropy(s string) bool {
	for _, tok := range strings.FieldsFunc(s, func(r rune) bool { return !isBase64Rune(r) }) {
		tok = strings.TrimRight(tok, "=")
		if len(tok) < 20 || strings.HasPrefix(tok, "/") || strings.Contains(tok, "//") {
			continue // too short to be a key, or a path
		}
		var upper, lower, digit bool
		for _, r := range tok {
			upper = upper || unicode.IsUpper(r)
			lower = lower || unicode.IsLower(r)
			digit = digit || unicode.IsDigit(r)
		}
		if !upper || !lower || !digit {
			continue
		}
		threshold := 4.1
		if len(tok) >= 32 {
			threshold = 4.3
		}
		if shannon(tok) >= threshold {
			return true
		}
	}
	return false
}

func isBase64Rune(r rune) bool {
	return r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("+/=_-", r))
}

func shannon(s string) float64 {
	counts := map[rune]int{}
	for _, r := range s {
		counts[r]++
	}
	n, h := float64(len(s)), 0.0
	for _, c := range counts {
		p := float64(c) / n
		h -= p * math.Log2(p)
	}
	return h
}

var pathRE = regexp.MustCompile(`^(~?/|\./|\.\./)?[A-Za-z0-9._@+-]+(/[A-Za-z0-9._@+-]+)*/?$`)

// pathShaped reports whether a value under passwordFile or keyPath is a file path:
// path characters only, and a directory separator or a file extension. A literal
// password (hunter2) is neither.
func pathShaped(s string) bool {
	if !pathRE.MatchString(s) || highEntropy(s) {
		return false
	}
	if strings.Contains(s, "/") {
		return true
	}
	dot := strings.LastIndexByte(s, '.')
	return dot > 0 && dot < len(s)-1 && len(s)-dot <= 9
}

// objectNameShaped reports whether a value under existingSecret or secretName is the
// name of a Kubernetes object, or a data key within one.
func objectNameShaped(s string) bool {
	return len(validation.IsConfigMapKey(s)) == 0 && !highEntropy(s)
}

// holdsText reports whether a value is, or contains, a non-empty string. Secret-looking
// keys holding only numbers or booleans (password.minLength: 8, token.enabled: true)
// carry no secret text.
func holdsText(v any) bool {
	switch x := v.(type) {
	case string:
		return x != ""
	case map[string]any:
		for _, item := range x {
			if holdsText(item) {
				return true
			}
		}
	case []any:
		for _, item := range x {
			if holdsText(item) {
				return true
			}
		}
	}
	return false
}
