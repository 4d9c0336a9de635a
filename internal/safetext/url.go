package safetext

import (
	"net/url"
	"strings"
)

// RedactURL returns a repository or registry URL as Eva may record or print it: without
// user information that can hold a credential (https://x-access-token:TOKEN@host: all of
// it, since a token also works as a user name; ssh://git:pass@host: the password), and
// without a query or fragment (?access_token=…). The result is escaped. Text that is
// not a URL with a scheme (a local path, git@host:repo) loses a password written
// before its '@' the same way.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return Escape(redactPlain(s))
	}
	if u.User != nil {
		if name := u.User.Username(); isSSH(u.Scheme) && name != "" {
			u.User = url.User(name)
		} else {
			u.User = nil
		}
	}
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	return Escape(u.String())
}

// HasCredentials reports whether a URL carries something RedactURL removes: a
// password, a user name over anything but SSH, a query or a fragment.
func HasCredentials(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return redactPlain(s) != s
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return true
	}
	if u.User == nil {
		return false
	}
	_, hasPassword := u.User.Password()
	return hasPassword || !isSSH(u.Scheme)
}

// isSSH reports whether a URL scheme is SSH, whose user name (git) is not a secret.
func isSSH(scheme string) bool {
	switch strings.ToLower(scheme) {
	case "ssh", "git+ssh", "ssh+git":
		return true
	}
	return false
}

// redactPlain removes a credential and a query from text that does not parse as a URL:
// scp-like addresses (user@host:path, whose user name is kept) and anything malformed
// (whose user information goes as in RedactURL).
func redactPlain(s string) string {
	s, _, _ = strings.Cut(s, "?")
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return s
	}
	start, keepName := 0, true
	if i := strings.Index(s, "://"); i >= 0 && i < at {
		start, keepName = i+len("://"), isSSH(s[:i])
	}
	user := s[start:at]
	if strings.Contains(user, "/") {
		return s // the '@' is in the path
	}
	name, _, _ := strings.Cut(user, ":")
	if !keepName || name == "" {
		return s[:start] + s[at+1:]
	}
	return s[:start] + name + s[at:]
}
