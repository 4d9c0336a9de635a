package render

import (
	"bytes"
	"fmt"
	"path"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/manifest"
	"github.com/aidonow/eva/internal/sopsdoc"
	"github.com/aidonow/eva/internal/tenant"
)

// EncryptedSecret is one of a tenant's SOPS-encrypted Secret manifests (spec.secrets),
// published beside the tenant's workloads and decrypted by kustomize-controller. What is
// published is the document as sopsdoc.Check read it, written by Eva's own encoder in
// the author's key order (SOPS' message authentication code covers the values in
// document order): never the author's bytes, which kustomize could read otherwise than
// Eva did. Its plaintext never passes through the renderer.
type EncryptedSecret struct {
	// Name is the Secret's name in the tenant's namespace.
	Name string
	// Data is the encrypted manifest as Eva wrote it (sopsdoc.Secret.Canonical).
	Data []byte
}

// SecretsDir is the folder of a tenant's encrypted Secrets, below its workloads (the
// foundation, applied first, grants the applier the right to write them).
const SecretsDir = "secrets"

// SecretsRoleBindingName lets the tenant's applier account write Secrets in the tenant's
// namespace (and nowhere else): it is bound there, by the foundation, only for tenants
// that have Secrets.
const SecretsRoleBindingName = "eva-tenant-secrets"

// hasSecrets reports whether the tenant's encrypted Secrets are published: only while
// it is Active (a suspended or decommissioned tenant runs no release that reads them).
func hasSecrets(t *evav1.EvaTenant) bool {
	return len(t.Spec.Secrets) > 0 && t.Spec.LifecycleOrDefault() == evav1.LifecycleActive
}

// checkSecrets checks the tenant's encrypted Secrets once per render and returns those
// to publish, each as Eva writes it (sopsdoc.Secret.Canonical): none unless the tenant
// is Active. It refuses Secrets the environment cannot decrypt: without secrets
// settings, not encrypted for one of the tenant's own age recipients (its decryption
// Secret could not read them after publishing), or encrypted for another tenant's. The documents' own rules are the tenant's validation.
func (r *Renderer) checkSecrets(t *evav1.EvaTenant) ([]EncryptedSecret, error) {
	if len(t.Spec.Secrets) == 0 {
		return nil, nil
	}
	settings := r.Env.Settings.Secrets
	if settings == nil {
		return nil, fmt.Errorf("tenant %s has encrypted Secrets, but environment %s has no secrets settings (keySecretPrefix, recipients) to decrypt them with",
			t.Spec.CapsuleCode, r.Env.Name)
	}
	code := t.Spec.CapsuleCode
	out := make([]EncryptedSecret, 0, len(t.Spec.Secrets))
	for _, s := range t.Spec.Secrets {
		name := tenant.SecretName(code, s.Name)
		doc, issues := sopsdoc.Check([]byte(s.Sops), name, tenant.Namespace(code))
		if len(issues) > 0 {
			return nil, fmt.Errorf("tenant %s: spec.secrets %s: %s", code, s.Name, issues[0].Message)
		}
		if why := settings.CheckFor(code, doc.Recipients); why != "" {
			return nil, fmt.Errorf("tenant %s: Secret %s, environment %s: %s", code, doc.Name, r.Env.Name, why)
		}
		out = append(out, EncryptedSecret{Name: name, Data: doc.Canonical})
	}
	if !hasSecrets(t) {
		return nil, nil
	}
	return out, nil
}

// withSecretsRoleBinding appends to a GitOps foundation manifest, for a tenant with
// Secrets, the RoleBinding that grants the tenant's applier account (which
// kustomize-controller impersonates) the Secrets of the tenant's namespace, so that it
// can apply them once decrypted; its ClusterRole grants nothing outside a namespace it
// is bound in. Pure-cluster bundles do without: the operator applies the Secrets itself.
func (r *Renderer) withSecretsRoleBinding(foundation []byte, t *evav1.EvaTenant) ([]byte, error) {
	if !hasSecrets(t) {
		return foundation, nil
	}
	env := r.Env.Settings
	code := t.Spec.CapsuleCode
	s := &scope{r: r, t: t, code: code, ns: tenant.Namespace(code)}
	binding := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: s.meta(SecretsRoleBindingName),
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: env.SecretsClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: ApplierName(code), Namespace: env.FluxNamespace}},
	}
	buf := bytes.NewBuffer(bytes.Clone(foundation))
	buf.WriteString("---\n")
	if err := manifest.EncodeObject(buf, binding); err != nil {
		return nil, fmt.Errorf("encoding the Secrets RoleBinding of %s: %w", code, err)
	}
	return buf.Bytes(), nil
}

// secretFiles lays out the tenant's encrypted Secrets below the folder dir.
func secretFiles(dir string, secrets []EncryptedSecret) []File {
	files := make([]File, 0, len(secrets))
	for _, s := range secrets {
		files = append(files, File{Path: path.Join(dir, SecretsDir, s.Name+".yaml"), Data: s.Data})
	}
	return files
}

// decryption is the workloads Kustomization's SOPS decryption with the tenant's own
// decryption Secret (no other tenant's Kustomization references it), for a tenant
// with Secrets.
func (r *Renderer) decryption(t *evav1.EvaTenant) *kustomizev1.Decryption {
	if !hasSecrets(t) || r.Env.Settings.Secrets == nil {
		return nil
	}
	return &kustomizev1.Decryption{Provider: "sops", SecretRef: &meta.LocalObjectReference{Name: r.Env.Settings.Secrets.KeySecret(t.Spec.CapsuleCode)}}
}
