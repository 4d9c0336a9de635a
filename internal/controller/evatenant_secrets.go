package controller

import (
	"context"
	"encoding/base64"
	"fmt"
	"sort"
	"strings"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/sopsdoc"
	"github.com/aidonow/eva/internal/tenant"
)

// The operator reads each tenant's decryption key (pure-cluster mode) from a Secret of
// its own namespace: a Role, not a ClusterRole. It writes the decrypted Secrets into
// tenant namespaces (the admission policy fences its writes there) and never reads
// them back.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get,namespace=eva-system
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create;update;patch;delete

// AgeKeys are the tenants' age private keys the operator decrypts their Secrets with in
// pure-cluster mode: each tenant's own, read from its decryption Secret in Namespace
// (named by the environment's secrets.keySecretPrefix, every value of a key ending in
// .agekey) at each use, so a rotated key is picked up without a restart. They are held
// in memory only, and one tenant's key never decrypts another tenant's Secrets.
type AgeKeys struct {
	Reader    client.Reader
	Namespace string
}

// Identities reads and parses the keys of the decryption Secret name.
func (k *AgeKeys) Identities(ctx context.Context, name string) ([]age.Identity, error) {
	key := types.NamespacedName{Namespace: k.Namespace, Name: name}
	var s corev1.Secret
	if err := k.Reader.Get(ctx, key, &s); err != nil {
		return nil, fmt.Errorf("reading the decryption key %s: %w", key, err)
	}
	var ids []age.Identity
	for name, data := range s.Data {
		if !strings.HasSuffix(name, ".agekey") {
			continue
		}
		parsed, err := age.ParseIdentities(strings.NewReader(string(data)))
		if err != nil {
			return nil, fmt.Errorf("the decryption key %s, %s: not age identities", key, name)
		}
		ids = append(ids, parsed...)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("the decryption key %s holds no *.agekey value", key)
	}
	return ids, nil
}

// decryptedSecrets decrypts the tenant's encrypted Secrets in memory for a pure-cluster
// apply, with the tenant's own key only. Errors name the Secret and the reason, never a
// value.
func (r *EvaTenantReconciler) decryptedSecrets(ctx context.Context, t *evav1.EvaTenant) ([]*unstructured.Unstructured, error) {
	if len(t.Spec.Secrets) == 0 || t.Spec.LifecycleOrDefault() != evav1.LifecycleActive {
		return nil, nil
	}
	settings := r.Renderer.Env.Settings.Secrets
	if r.AgeKeys == nil || settings == nil {
		return nil, fmt.Errorf("the tenant has encrypted Secrets, but the environment has no secrets settings (keySecretPrefix, recipients) to decrypt them with")
	}
	code := t.Spec.CapsuleCode
	ids, err := r.AgeKeys.Identities(ctx, settings.KeySecret(code))
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, 0, len(t.Spec.Secrets))
	for _, s := range t.Spec.Secrets {
		name := tenant.SecretName(code, s.Name)
		values, err := sopsdoc.Decrypt([]byte(s.Sops), ids...)
		if err != nil {
			return nil, fmt.Errorf("decrypting Secret %s: %w", name, err)
		}
		out = append(out, secretObject(name, tenant.Namespace(code), values))
	}
	return out, nil
}

// secretObject is a decrypted tenant Secret as the operator applies it, with the label
// that makes helm-controller upgrade a release reading it as soon as it changes.
func secretObject(name, namespace string, values map[string][]byte) *unstructured.Unstructured {
	data := make(map[string]any, len(values))
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		data[k] = base64.StdEncoding.EncodeToString(values[k])
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
		"metadata": map[string]any{"name": name, "namespace": namespace,
			"labels": map[string]any{sopsdoc.WatchLabel: "Enabled"}},
		"data": data,
	}}
}
