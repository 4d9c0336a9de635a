package safetext

import "testing"

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://x-access-token:ghp_secret@git.example.com/fleet.git": "https://git.example.com/fleet.git",
		"https://ghp_secret@git.example.com/fleet.git":                "https://git.example.com/fleet.git",
		"https://git.example.com/fleet.git?access_token=ghp_secret":   "https://git.example.com/fleet.git",
		"https://git.example.com/fleet.git#ghp_secret":                "https://git.example.com/fleet.git",
		"ssh://git@git.example.com/fleet.git":                         "ssh://git@git.example.com/fleet.git",
		"ssh://git:ghp_secret@git.example.com/fleet.git":              "ssh://git@git.example.com/fleet.git",
		"git@git.example.com:platform/fleet.git":                      "git@git.example.com:platform/fleet.git",
		"git:ghp_secret@git.example.com:platform/fleet.git":           "git@git.example.com:platform/fleet.git",
		"/srv/git/fleet.git":                                          "/srv/git/fleet.git",
		"https://eva:ghp_secret@host/a\nb":                            `https://host/a\nb`,
		"https://eva:ghp_sec ret@host/%zz":                            "https://host/%zz",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
	if HasCredentials("https://git.example.com/fleet.git") || !HasCredentials("https://eva:x@git.example.com/fleet.git") {
		t.Error("HasCredentials")
	}
}
