package tenant

import (
	"slices"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// secretWords are key words that name a secret on their own.
var secretWords = map[string]bool{
	"password": true, "passwd": true, "passphrase": true, "pwd": true,
	"secret": true, "secrets": true, "token": true, "credential": true,
	"credentials": true, "apikey": true, "privatekey": true, "secretkey": true,
	"accesskey": true, "clientsecret": true, "connectionstring": true, "dsn": true,
	"bearer": true, "mnemonic": true, "hmackey": true, "privkey": true,
}

// secretPairs are two consecutive key words that name a secret together.
var secretPairs = map[[2]string]bool{
	{"api", "key"}: true, {"private", "key"}: true, {"access", "key"}: true,
	{"secret", "key"}: true, {"client", "secret"}: true, {"connection", "string"}: true,
	{"auth", "key"}: true, {"signing", "key"}: true, {"encryption", "key"}: true,
	{"pass", "word"}: true, {"pass", "wd"}: true, {"pass", "phrase"}: true,
	{"hmac", "key"}: true, {"priv", "key"}: true, {"otp", "seed"}: true, {"totp", "seed"}: true,
	{"session", "cookie"}: true, {"smtp", "auth"}: true,
}

// secretTails are words that name a secret only as the last word of a key: dbPass and
// adminPw are passwords, but passThrough and pwMode are not.
var secretTails = map[string]bool{"pass": true, "pw": true, "pin": true}

// passwordStems are found inside the concatenated words of a key, so that separators
// and digit look-alikes (pass_word, passWd, p4ssw0rd) do not hide a password key. Only
// stems no ordinary English word contains are listed ("secret" is in "secretary"); the
// German and Spanish words for a password too (contraseña is folded to contrasena).
var passwordStems = []string{"password", "passwd", "passphrase", "passwort", "kennwort", "contrasena"}

// secretSuffixes end the concatenated words of a key that names a secret written in one
// lower-case word (authtoken, githubtoken, awsaccesskey), where splitWords finds no
// word boundary. "pass" is not here: bypass and compass end with it.
var secretSuffixes = []string{"token", "secret", "apikey", "accesskey", "secretkey", "privatekey"}

// referenceWords end or start a key that names where a secret lives rather than the
// secret itself (existingSecret, secretName, tokenSecretRef).
var referenceWords = map[string]bool{"name": true, "ref": true, "refs": true, "existing": true}

// fileWords end a key that names a file holding a secret (passwordFile, keyPath). The
// exemption holds only while the value is shaped like a path.
var fileWords = map[string]bool{"file": true, "path": true}

// keyKind is what a values key says about the value under it.
type keyKind int

const (
	keyPlain      keyKind = iota // an ordinary setting
	keySecret                    // the value is a secret (password, apiKey)
	keySecretRef                 // the value names a Kubernetes object holding a secret
	keySecretFile                // the value is the path of a file holding a secret
)

// keyInfo is the classification of one values key.
type keyInfo struct {
	kind keyKind
	// headIsSecret: the key's last word(s) name the secret itself (password,
	// dbPassword), not an attribute of it (passwordMinLength, tokenTTL). Only such keys
	// refuse numbers, so settings about secrets keep working.
	headIsSecret bool
}

// LooksLikeSecret reports whether a Helm values key names a secret value: password,
// apiKey, db_password, client-secret, privateKey, credentials and the like, in any
// casing or separator style, and after Unicode confusable folding (a Cyrillic "а" in
// "pаssword" is still a password). Keys that name a reference to a secret
// (existingSecret, secretName, passwordFile) are not secrets themselves.
func LooksLikeSecret(key string) bool {
	return classifyKey(key).kind == keySecret
}

func classifyKey(key string) keyInfo {
	words := splitWords(foldKey(key))
	if len(words) == 0 {
		return keyInfo{}
	}
	secret, head := false, false
	last := len(words) - 1
	for i, w := range words {
		pair := i > 0 && secretPairs[[2]string{words[i-1], w}]
		if secretWords[w] || pair || (i == last && secretTails[w]) {
			secret = true
			head = i == last
		}
	}
	joined := deLeet(strings.Join(words, ""))
	for _, stem := range passwordStems {
		if i := strings.Index(joined, stem); i >= 0 {
			secret = true
			head = head || i+len(stem) == len(joined)
		}
	}
	for _, suffix := range secretSuffixes {
		if strings.HasSuffix(joined, suffix) {
			secret, head = true, true
		}
	}
	if !secret {
		// keyFile, tls.keyPath: "key" alone names nothing secret, but with File or Path it
		// names a key file, and a literal there is the key itself.
		if last > 0 && fileWords[words[last]] && slices.Contains(words[:last], "key") {
			return keyInfo{kind: keySecretFile}
		}
		return keyInfo{}
	}
	switch {
	case fileWords[words[last]]:
		return keyInfo{kind: keySecretFile}
	case referenceWords[words[0]] || referenceWords[words[last]]:
		return keyInfo{kind: keySecretRef}
	}
	return keyInfo{kind: keySecret, headIsSecret: head}
}

// foldKey normalises a key for comparison: NFKD (full-width and mathematical letters
// become ASCII, accents come apart), combining marks and invisible format characters
// (zero-width space, soft hyphen) dropped, then letters that merely look Latin mapped to
// the Latin letter they imitate. golang.org/x/text has no confusables table, so the
// letters an attacker would use to spell a Latin key (Cyrillic, Greek) are listed here.
// Case is kept: splitWords needs it to find camelCase words.
func foldKey(key string) string {
	var b strings.Builder
	for _, r := range norm.NFKD.String(key) {
		if unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Cf, r) {
			continue
		}
		if l, ok := confusables[r]; ok {
			r = l
		}
		b.WriteRune(r)
	}
	return b.String()
}

// FoldKey returns a key in the form Eva compares keys in: folded as foldKey does and in
// lower case, so "Image", "IMAGE" and "іmage" (Cyrillic і) are one key.
func FoldKey(key string) string { return strings.ToLower(foldKey(key)) }

// confusables maps Cyrillic, Greek and other letters to the Latin letter they are
// drawn like (after the Unicode confusables list, restricted to letters of keys).
var confusables = map[rune]rune{
	// Cyrillic lower case.
	'а': 'a', 'в': 'b', 'е': 'e', 'ё': 'e', 'к': 'k', 'м': 'm', 'н': 'h', 'о': 'o',
	'р': 'p', 'с': 'c', 'т': 't', 'у': 'y', 'х': 'x', 'і': 'i', 'ї': 'i', 'ј': 'j',
	'ѕ': 's', 'ԁ': 'd', 'ԛ': 'q', 'ԝ': 'w', 'ӏ': 'l', 'һ': 'h', 'ɡ': 'g', 'ү': 'y',
	// Cyrillic upper case.
	'А': 'A', 'В': 'B', 'Е': 'E', 'К': 'K', 'М': 'M', 'Н': 'H', 'О': 'O', 'Р': 'P',
	'С': 'C', 'Т': 'T', 'У': 'Y', 'Х': 'X', 'І': 'I', 'Ј': 'J', 'Ѕ': 'S', 'Ԁ': 'D',
	'Ԛ': 'Q', 'Ԝ': 'W', 'Ӏ': 'I', 'Һ': 'H',
	// Greek.
	'α': 'a', 'ο': 'o', 'ρ': 'p', 'ν': 'v', 'ι': 'i', 'κ': 'k', 'χ': 'x', 'υ': 'u',
	'τ': 't', 'ε': 'e', 'ϲ': 'c', 'ϳ': 'j',
	'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'Ι': 'I', 'Κ': 'K', 'Μ': 'M',
	'Ν': 'N', 'Ο': 'O', 'Ρ': 'P', 'Τ': 'T', 'Υ': 'Y', 'Χ': 'X', 'Ϲ': 'C',
	// Latin letters that are not ASCII but read as ASCII.
	'ı': 'i', 'ȷ': 'j', 'ł': 'l', 'ø': 'o', 'đ': 'd', 'ħ': 'h',
}

// deLeet undoes digit look-alikes in a lower-case word (p4ssw0rd → password). It is
// applied only when looking for passwordStems, where no real key has digits.
func deLeet(s string) string {
	return strings.NewReplacer("0", "o", "1", "l", "3", "e", "4", "a", "5", "s", "$", "s", "@", "a").Replace(s)
}

// splitWords splits camelCase, PascalCase, snake_case, kebab-case and dotted keys into
// lower-case words: "dbPassword" → [db password], "API_KEY" → [api key].
func splitWords(key string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	runes := []rune(key)
	for i, r := range runes {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r):
			// A new word starts at an upper-case letter after a lower-case one, or at the
			// last upper-case letter of an acronym followed by lower case (APIKey → API Key).
			prevLower := i > 0 && unicode.IsLower(runes[i-1])
			acronymEnd := i > 0 && unicode.IsUpper(runes[i-1]) && i+1 < len(runes) && unicode.IsLower(runes[i+1])
			if prevLower || acronymEnd {
				flush()
			}
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return words
}
