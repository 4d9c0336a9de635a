package tenant

import (
	"strings"
	"unicode"
)

// secretWords are key words that name a secret on their own.
var secretWords = map[string]bool{
	"password": true, "passwd": true, "passphrase": true, "pwd": true,
	"secret": true, "secrets": true, "token": true, "credential": true,
	"credentials": true, "apikey": true, "privatekey": true, "secretkey": true,
	"accesskey": true, "clientsecret": true, "connectionstring": true, "dsn": true,
}

// secretPairs are two consecutive key words that name a secret together.
var secretPairs = map[[2]string]bool{
	{"api", "key"}: true, {"private", "key"}: true, {"access", "key"}: true,
	{"secret", "key"}: true, {"client", "secret"}: true, {"connection", "string"}: true,
	{"auth", "key"}: true, {"signing", "key"}: true, {"encryption", "key"}: true,
}

// referenceWords end or start a key that names where a secret lives rather than the
// secret itself (existingSecret, secretName, tokenSecretRef).
var referenceWords = map[string]bool{"name": true, "ref": true, "refs": true, "existing": true, "file": true, "path": true}

// LooksLikeSecret reports whether a Helm values key names a secret value: password,
// apiKey, db_password, client-secret, privateKey, credentials and the like, in any
// casing or separator style. Keys that name a reference to a secret (existingSecret,
// secretName, passwordFile) are not secrets themselves.
func LooksLikeSecret(key string) bool {
	words := splitWords(key)
	if len(words) == 0 {
		return false
	}
	if referenceWords[words[0]] || referenceWords[words[len(words)-1]] {
		return false
	}
	for i, w := range words {
		if secretWords[w] {
			return true
		}
		if i > 0 && secretPairs[[2]string{words[i-1], w}] {
			return true
		}
	}
	return false
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
