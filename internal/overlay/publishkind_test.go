package overlay

import (
	"strings"
	"testing"
)

// TestCheckPublish: each applier's source takes one kind of publish; a Bucket none.
func TestCheckPublish(t *testing.T) {
	for _, c := range []struct {
		settings Settings
		kind     string
		refused  string // "" when allowed
	}{
		{Settings{GitOpsSource: SourceRef{Kind: "GitRepository"}}, PublishGit, ""},
		{Settings{GitOpsSource: SourceRef{Kind: "GitRepository"}}, PublishOCI, "publish to git, or make gitopsSource.kind OCIRepository"},
		{Settings{GitOpsSource: SourceRef{Kind: "OCIRepository"}}, PublishOCI, ""},
		{Settings{GitOpsSource: SourceRef{Kind: "OCIRepository"}}, PublishGit, "publish to oci, or make gitopsSource.kind GitRepository"},
		{Settings{GitOpsSource: SourceRef{Kind: "Bucket"}}, PublishGit, "which no publish writes"},
		{Settings{Applier: ApplierArgoCD, GitOpsSource: SourceRef{Kind: "GitRepository"}}, PublishGit, ""},
		{Settings{Applier: ApplierArgoCD, GitOpsSource: SourceRef{Kind: "GitRepository"}}, PublishOCI, "Argo CD reads the published tree from git"},
	} {
		err := c.settings.CheckPublish(c.kind)
		if c.refused == "" && err != nil || c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)) {
			t.Errorf("%s applier, %s source, publish %s: %v, want refused %q", c.settings.Applier, c.settings.GitOpsSource.Kind, c.kind, err, c.refused)
		}
	}
}
