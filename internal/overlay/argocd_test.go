package overlay

import (
	"strings"
	"testing"
	"time"
)

func TestArgoCDSettings(t *testing.T) {
	s, err := ParseSettings([]byte("domain: a.com\nseedImage: x\napplier: argocd\n" +
		"argocd: {repoURL: 'https://git.example.com/t.git', chartRepository: 'registry.example.com/eva/charts'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := s.ArgoCD
	if s.Applier != ApplierArgoCD || a.Namespace != "argocd" || a.TargetRevision != "HEAD" || a.DestinationServer != "https://kubernetes.default.svc" {
		t.Errorf("defaults: %s %+v", s.Applier, a)
	}
	if *a.SyncRetries != 5 || a.SyncRetryBackoff.Duration != 5*time.Second {
		t.Errorf("retry defaults: %d %s", *a.SyncRetries, a.SyncRetryBackoff.Duration)
	}
	s, err = ParseSettings([]byte("domain: a.com\nseedImage: x\napplier: argocd\n" +
		"argocd: {repoURL: 'https://g.example.com/t.git', chartRepository: 'https://c.example.com', syncRetries: 0, syncRetryBackoff: 2s}\n"))
	if err != nil || *s.ArgoCD.SyncRetries != 0 || s.ArgoCD.SyncRetryBackoff.Duration != 2*time.Second {
		t.Errorf("no retries, as asked: %v %+v", err, s)
	}
	if s, err := ParseSettings([]byte("domain: a.com\nseedImage: x\nchartSource: {name: c}\ngitopsSource: {name: g}\n")); err != nil || s.Applier != ApplierFlux {
		t.Errorf("the default applier: %v %v", s, err)
	}
}

func TestArgoCDSettingsErrors(t *testing.T) {
	const base = "domain: a.com\nseedImage: x\n"
	const ok = "repoURL: 'https://git.example.com/t.git', chartRepository: 'https://charts.example.com'"
	for _, tc := range []struct{ yaml, want string }{
		{base + "applier: argo\n", `applier: "argo": must be flux or argocd`},
		{base + "applier: argocd\n", "argocd: required with applier: argocd"},
		{base + "chartSource: {name: c}\ngitopsSource: {name: g}\nargocd: {" + ok + "}\n", "argocd: only with applier: argocd"},
		{base + "applier: argocd\nargocd: {chartRepository: 'https://c.example.com'}\n", `argocd.repoURL: ""`},
		{base + "applier: argocd\nargocd: {repoURL: 'file:///etc', chartRepository: 'https://c.example.com'}\n", `argocd.repoURL: "file:///etc"`},
		{base + "applier: argocd\nargocd: {repoURL: 'https://g.example.com/t.git', chartRepository: 'ftp://c.example.com'}\n", `argocd.chartRepository: "ftp://c.example.com"`},
		{base + "applier: argocd\nargocd: {repoURL: 'https://g.example.com/t.git', chartRepository: ''}\n", `argocd.chartRepository: ""`},
		{base + "applier: argocd\nargocd: {" + ok + ", namespace: Argo}\n", `argocd.namespace: "Argo"`},
		{base + "applier: argocd\nargocd: {" + ok + ", targetRevision: 'main branch'}\n", `argocd.targetRevision: "main branch"`},
		{base + "applier: argocd\nargocd: {" + ok + "}\nsecrets: {keySecretPrefix: s-, recipients: {ACMECO: [x]}}\n", "secrets: not supported with applier: argocd"},
		{base + "applier: argocd\nargocd: {" + ok + ", syncRetries: -1}\n", "argocd.syncRetries: -1: must be between 0 and 10"},
		{base + "applier: argocd\nargocd: {" + ok + ", syncRetries: 11}\n", "argocd.syncRetries: 11"},
		{base + "applier: argocd\nargocd: {" + ok + ", syncRetryBackoff: 100ms}\n", "argocd.syncRetryBackoff: 100ms: must be between 1s and 3m0s"},
		{base + "applier: argocd\nargocd: {" + ok + ", syncRetryBackoff: 1h}\n", "argocd.syncRetryBackoff: 1h0m0s"},
		{base + "applier: argocd\nargocd: {" + ok + ", syncRetryBackoff: 0s}\n", "argocd.syncRetryBackoff: 0s: must be between 1s and 3m0s"},
		{"domain: a.com\napplier: argocd\nargocd: {" + ok + "}\n", "seedImage: required"},
	} {
		if _, err := ParseSettings([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error containing %q", tc.yaml, err, tc.want)
		}
	}
}
