package overlay

import "fmt"

// Publish destinations an environment's applier reads the published tree from: the
// kinds of evactl publish (git, oci) and of the operator's --publish.
const (
	PublishGit = "git"
	PublishOCI = "oci"
)

// CheckPublish refuses to publish to a destination of kind (PublishGit or PublishOCI)
// that the environment's applier does not read: Flux reads its gitopsSource (a
// GitRepository reads git, an OCIRepository an OCI artifact, a Bucket neither), Argo
// CD its repoURL (git). The tenants' Kustomizations name the source, so a tree
// published elsewhere would never be applied.
func (s *Settings) CheckPublish(kind string) error {
	if s.Applier == ApplierArgoCD {
		if kind != PublishGit {
			return fmt.Errorf("Argo CD reads the published tree from git (argocd.repoURL), which publishing to %s never reaches: publish to git", kind)
		}
		return nil
	}
	reads := map[string]string{"GitRepository": PublishGit, "OCIRepository": PublishOCI}[s.GitOpsSource.Kind]
	if reads == kind {
		return nil
	}
	src := fmt.Sprintf("the %s %s/%s (gitopsSource)", s.GitOpsSource.Kind, s.GitOpsSource.Namespace, s.GitOpsSource.Name)
	if reads == "" {
		return fmt.Errorf("Flux reads the published tree from %s, which no publish writes: render it with evactl render --out and deliver it there", src)
	}
	return fmt.Errorf("Flux reads the published tree from %s, which publishing to %s never reaches: publish to %s, or make gitopsSource.kind %s",
		src, kind, reads, map[string]string{PublishGit: "GitRepository", PublishOCI: "OCIRepository"}[kind])
}
