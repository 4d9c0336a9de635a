package tenant

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

func TestLooksLikeSecret(t *testing.T) {
	secret := []string{"password", "Password", "dbPassword", "db_password", "DB-PASSWORD", "passwd",
		"adminPassphrase", "secret", "clientSecret", "client_secret", "token", "authToken", "GITHUB_TOKEN",
		"apiKey", "api_key", "APIKey", "X-API-KEY", "privateKey", "private-key", "credentials",
		"awsAccessKey", "secretKey", "connectionString", "dsn", "signingKey", "encryptionKey",
		// Spellings found by a hostile review: split, abbreviated, digit and Unicode look-alikes.
		"dbPass", "pass_word", "passWd", "PASS-WORD", "p4ssw0rd", "pаssword" /* Cyrillic а */, "ｐａｓｓｗｏｒｄ",
		"pass\u200bword", "pàssword", "tοken" /* Greek ο */, "authtoken", "githubtoken", "awsaccesskey", "bearer",
		// Issue 32's low findings: other words for keys, seeds and passwords.
		"hmacKey", "privKey", "otpSeed", "mnemonic", "passwort", "kennwort", "contrasena", "contraseña",
		"pin", "userPin", "sessionCookie", "smtpAuth", "HMAC_KEY", "totpSecret"}
	notSecret := []string{"replicaCount", "image", "logLevel", "existingSecret", "secretName",
		"tokenSecretRef", "passwordFile", "keyPath", "maxTokens", "publicKey", "key", "tokenizer",
		"secretary", "monkey", "apiVersion", "credentialsSecretName", "",
		"bypass", "compass", "passThrough", "tokenizer", "keyboard", "turkey", "passwordFile", "tokenPath",
		"pinned", "spinner", "pinPolicy", "cookieName", "authMode", "smtpHost", "seedsVersion", "hmacAlgorithm"}
	for _, k := range secret {
		if !LooksLikeSecret(k) {
			t.Errorf("LooksLikeSecret(%q) = false, want true", k)
		}
	}
	for _, k := range notSecret {
		if LooksLikeSecret(k) {
			t.Errorf("LooksLikeSecret(%q) = true, want false", k)
		}
	}
}

func tenantWithValues(t *testing.T, values map[string]any) *evav1.EvaTenant {
	t.Helper()
	raw, err := json.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	return &evav1.EvaTenant{
		TypeMeta:   metav1.TypeMeta{APIVersion: evav1.GroupVersion.String(), Kind: evav1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "devusr"},
		Spec: evav1.EvaTenantSpec{CapsuleCode: "DEVUSR", Tier: evav1.TierStarter,
			HelmValues: map[string]apiextensionsv1.JSON{"crm": {Raw: raw}}},
	}
}

func TestValidateSecretValues(t *testing.T) {
	c := DefaultCatalog()
	ok := map[string]any{
		"password":       map[string]any{"minLength": 12, "requireSymbols": true},
		"token":          map[string]any{"enabled": false},
		"existingSecret": "crm-db",
		"auth":           map[string]any{"secretName": "crm-auth"},
	}
	if errs := c.Validate(tenantWithValues(t, ok)); len(errs) != 0 {
		t.Errorf("non-secret values refused: %v", errs)
	}
	bad := map[string]any{"db": map[string]any{"password": "hunter2"}, "list": []any{map[string]any{"apiKey": "k"}}}
	errs := c.Validate(tenantWithValues(t, bad))
	if len(errs) != 2 {
		t.Fatalf("got %d errors, want 2: %v", len(errs), errs)
	}
	for i, want := range []string{"spec.helmValues[crm].db.password", "spec.helmValues[crm].list[0].apiKey"} {
		if errs[i].Field != want {
			t.Errorf("error %d at %s, want %s", i, errs[i].Field, want)
		}
	}
	for _, e := range errs {
		if s := e.Error(); strings.Contains(s, "hunter2") {
			t.Errorf("error message leaks the secret value: %s", s)
		}
	}
}

func TestValidateUpdate(t *testing.T) {
	old := &evav1.EvaTenant{Spec: evav1.EvaTenantSpec{CapsuleCode: "DEVUSR", Lifecycle: evav1.LifecycleDecommissioned}}
	changed := old.DeepCopy()
	changed.Spec.CapsuleCode = "OTHERS"
	changed.Spec.Lifecycle = ""
	errs := ValidateUpdate(old, changed)
	if len(errs) != 2 {
		t.Fatalf("got %v, want capsuleCode and lifecycle refused", errs)
	}
	if errs := ValidateUpdate(old, old.DeepCopy()); len(errs) != 0 {
		t.Fatalf("unchanged tenant refused: %v", errs)
	}
}

// TestSecretReasonConcurrent: the operator validates tenants in parallel reconciles,
// all sharing one gitleaks detector; run with -race.
func TestSecretReasonConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if SecretReason("notify", "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX") == "" ||
					SecretReason("url", fmt.Sprintf("https://crm.example.com/app/%d", i)) != "" {
					t.Error("verdict changed under concurrency")
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestSecretsHaveABudget: a tenant's encrypted Secrets together are bounded (issue 37,
// finding 7: sixteen files of 64 KiB grew the shared repository by a megabyte a change).
func TestSecretsHaveABudget(t *testing.T) {
	c := DefaultCatalog()
	tn := &evav1.EvaTenant{TypeMeta: metav1.TypeMeta{APIVersion: evav1.GroupVersion.String(), Kind: evav1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "devusr"},
		Spec:       evav1.EvaTenantSpec{CapsuleCode: "DEVUSR", Tier: evav1.TierStarter}}
	big := strings.Repeat("x", 60<<10)
	for i := range 5 {
		tn.Spec.Secrets = append(tn.Spec.Secrets, evav1.EncryptedSecret{Name: fmt.Sprintf("s%d", i), Sops: big})
	}
	over := func() bool {
		for _, e := range c.Validate(tn) {
			if e.Field == "spec.secrets" && e.Type == field.ErrorTypeTooLong {
				return true
			}
		}
		return false
	}
	if !over() {
		t.Errorf("%d bytes of Secrets pass, want at most %d", 5*len(big), MaxSecretsBytes)
	}
	tn.Spec.Secrets = tn.Spec.Secrets[:4]
	if over() {
		t.Errorf("%d bytes of Secrets refused as too long, within %d", 4*len(big), MaxSecretsBytes)
	}
}

// TestNoSecretTakesTheNATSMount: the modules mount the tenant's NATS credentials as
// NATSMount in an environment with natsAccounts; a Secret of the tenant by that name
// would collide with it in every chart (the same volume and folder), so it is refused.
func TestNoSecretTakesTheNATSMount(t *testing.T) {
	tn := &evav1.EvaTenant{TypeMeta: metav1.TypeMeta{APIVersion: evav1.GroupVersion.String(), Kind: evav1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "devusr"},
		Spec: evav1.EvaTenantSpec{CapsuleCode: "DEVUSR", Tier: evav1.TierStarter,
			Secrets: []evav1.EncryptedSecret{{Name: NATSMount, Sops: "sops: {}"}}}}
	for _, e := range DefaultCatalog().Validate(tn) {
		if e.Field == "spec.secrets[0].name" && strings.Contains(e.Error(), "reserved") {
			return
		}
	}
	t.Fatalf("a Secret named %q was not refused: %v", NATSMount, DefaultCatalog().Validate(tn))
}
