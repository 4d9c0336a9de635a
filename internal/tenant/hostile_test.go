package tenant

import (
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// tenantOpt changes a test tenant.
type tenantOpt func(*testing.T, *evav1.EvaTenant)

// hostileTenant returns a valid Starter tenant changed by opts.
func hostileTenant(t *testing.T, opts ...tenantOpt) *evav1.EvaTenant {
	t.Helper()
	tn := &evav1.EvaTenant{
		TypeMeta:   metav1.TypeMeta{APIVersion: evav1.GroupVersion.String(), Kind: evav1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "devusr"},
		Spec:       evav1.EvaTenantSpec{CapsuleCode: "DEVUSR", Tier: evav1.TierStarter},
	}
	for _, o := range opts {
		o(t, tn)
	}
	return tn
}

func withTier(tier evav1.Tier) tenantOpt {
	return func(_ *testing.T, tn *evav1.EvaTenant) { tn.Spec.Tier = tier }
}

// withValues sets a module's helmValues from YAML, which reads better than Go maps.
func withValues(module, valuesYAML string) tenantOpt {
	return func(t *testing.T, tn *evav1.EvaTenant) {
		t.Helper()
		raw, err := yaml.YAMLToJSON([]byte(valuesYAML))
		if err != nil {
			t.Fatalf("test values: %v", err)
		}
		if tn.Spec.HelmValues == nil {
			tn.Spec.HelmValues = map[string]apiextensionsv1.JSON{}
		}
		tn.Spec.HelmValues[module] = apiextensionsv1.JSON{Raw: raw}
	}
}

func withCode(code string) tenantOpt {
	return func(_ *testing.T, tn *evav1.EvaTenant) {
		tn.Spec.CapsuleCode, tn.Name = code, strings.ToLower(code)
	}
}

// withValuesFrom adds a values reference, which every tenant is refused now.
func withValuesFrom(module string, kind evav1.ValuesKind, name, targetPath string) tenantOpt {
	return func(_ *testing.T, tn *evav1.EvaTenant) {
		tn.Spec.ValuesFrom = append(tn.Spec.ValuesFrom, evav1.ValuesReference{
			Module: module, Kind: kind, Name: name, ValuesKey: "value", TargetPath: targetPath})
	}
}

// withSecretMount hands the tenant's Secret <code>-<secret> to a module's pods.
func withSecretMount(module, secret string) tenantOpt {
	return func(_ *testing.T, tn *evav1.EvaTenant) {
		tn.Spec.SecretMounts = append(tn.Spec.SecretMounts, evav1.SecretMount{Module: module, Secret: secret})
	}
}

func withPin(module, version string) tenantOpt {
	return func(_ *testing.T, tn *evav1.EvaTenant) {
		tn.Spec.Versions = map[string]evav1.ModuleVersion{module: evav1.ModuleVersion(version)}
	}
}

const (
	jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
	pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MaGBir/JXHFOqX3v\n-----END RSA PRIVATE KEY-----\n"
)

// TestHostileValues: each hostile tenant is refused with exactly one error, at the exact
// path of the offending key, with a message that explains it and never holds the value.
func TestHostileValues(t *testing.T) {
	c := DefaultCatalog()
	crm := "spec.helmValues[crm]"
	cases := map[string]struct {
		opts      []tenantOpt
		path, msg string
		planted   string // a value that must not appear in the error
	}{
		// Secrets by key name, in every spelling.
		"number under password":   {[]tenantOpt{withValues("crm", "password: 84736251")}, crm + ".password", "password-like key holding a number", "84736251"},
		"number under dbPassword": {[]tenantOpt{withValues("crm", "db: {dbPassword: 1234}")}, crm + ".db.dbPassword", "holding a number", "1234"},
		"dbPass":                  {[]tenantOpt{withValues("crm", "db: {dbPass: hunter2}")}, crm + ".db.dbPass", "key names a secret", "hunter2"},
		"pass_word":               {[]tenantOpt{withValues("crm", "pass_word: hunter2")}, crm + ".pass_word", "key names a secret", "hunter2"},
		"passWd":                  {[]tenantOpt{withValues("crm", "passWd: hunter2")}, crm + ".passWd", "key names a secret", "hunter2"},
		"leet p4ssw0rd":           {[]tenantOpt{withValues("crm", "p4ssw0rd: hunter2")}, crm + ".p4ssw0rd", "key names a secret", "hunter2"},
		"cyrillic a in password":  {[]tenantOpt{withValues("crm", "db: {pаssword: hunter2}")}, crm + ".db.pаssword", "key names a secret", "hunter2"},
		"full-width password":     {[]tenantOpt{withValues("crm", "ｐａｓｓｗｏｒｄ: hunter2")}, crm + ".ｐａｓｓｗｏｒｄ", "key names a secret", "hunter2"},
		"zero-width space":        {[]tenantOpt{withValues("crm", "\"pass\u200bword\": hunter2")}, crm + ".pass\u200bword", "key names a secret", "hunter2"},
		"greek omicron in token":  {[]tenantOpt{withValues("crm", "tοken: hunter2")}, crm + ".tοken", "key names a secret", "hunter2"},
		"bearer under auth":       {[]tenantOpt{withValues("crm", "auth: {bearer: "+jwt+"}")}, crm + ".auth.bearer", "looks like a secret", jwt},
		"password in a list item": {[]tenantOpt{withValues("crm", "users: [{name: a, password: hunter2}]")}, crm + ".users[0].password", "key names a secret", "hunter2"},
		// Secrets by value under neutral keys.
		"url with credentials":     {[]tenantOpt{withValues("crm", "db: {url: 'postgres://admin:hunter2@db:5432/x'}")}, crm + ".db.url", "URL with credentials", "hunter2"},
		"url with token query":     {[]tenantOpt{withValues("crm", "hook: 'https://api.example.com/v1?access_token=abc123'")}, crm + ".hook", "secret in its query", "abc123"},
		"dsn without scheme":       {[]tenantOpt{withValues("crm", "db: {address: 'admin:hunter2@tcp(db:3306)/crm'}")}, crm + ".db.address", "connection string", "hunter2"},
		"ado connection string":    {[]tenantOpt{withValues("crm", "db: {conn: 'Server=db;User Id=sa;Password=hunter2;'}")}, crm + ".db.conn", "connection string with a secret", "hunter2"},
		"aws key id under id":      {[]tenantOpt{withValues("crm", "aws: {id: AKIAIOSFODNN7EXAMPLE}")}, crm + ".aws.id", "AWS access key ID", "AKIAIOSFODNN7EXAMPLE"},
		"aws secret under key":     {[]tenantOpt{withValues("crm", "aws: {key: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY}")}, crm + ".aws.key", "high-entropy", "wJalrXUtnFEMI"},
		"jwt under neutral key":    {[]tenantOpt{withValues("crm", "session: {sample: "+jwt+"}")}, crm + ".session.sample", "looks like a JWT", jwt},
		"pem under tls.key":        {[]tenantOpt{withValues("crm", "tls: {key: \""+strings.ReplaceAll(pem, "\n", `\n`)+"\"}")}, crm + ".tls.key", "PEM private key", "MIIEow"},
		"base64 blob under data":   {[]tenantOpt{withValues("crm", "data: c2VjcmV0LWRhdGEtdGhhdC1zaG91bGQtbm90LWJlLWhlcmUtMTIzNDU2Nzg5MA==")}, crm + ".data", "high-entropy", "c2VjcmV0"},
		"slack webhook (gitleaks)": {[]tenantOpt{withValues("crm", "notify: https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX")}, crm + ".notify", "gitleaks rule slack-webhook-url", "hooks.slack"},
		"passwordFile literal":     {[]tenantOpt{withValues("crm", "db: {passwordFile: hunter2}")}, crm + ".db.passwordFile", "not a path", "hunter2"},
		"keyPath literal":          {[]tenantOpt{withValues("crm", "tls: {keyPath: hunter2}")}, crm + ".tls.keyPath", "not a path", "hunter2"},
		"tokenPath literal":        {[]tenantOpt{withValues("crm", "tokenPath: 'hunter2 hunter3'")}, crm + ".tokenPath", "not a path", "hunter2"},
		"existingSecret not name":  {[]tenantOpt{withValues("crm", "existingSecret: 'P@ss w0rd!'")}, crm + ".existingSecret", "not an object name", "P@ss"},
		// Platform-owned values.
		"image repository":        {[]tenantOpt{withValues("crm", "image: {repository: evil.example.com/x, tag: latest}")}, crm + ".image", "platform-owned", "evil.example.com"},
		"image upper case":        {[]tenantOpt{withValues("crm", "IMAGE: {tag: latest}")}, crm + ".IMAGE", "platform-owned", "latest"},
		"image with cyrillic i":   {[]tenantOpt{withValues("crm", "іmage: {digest: x}")}, crm + ".іmage", "platform-owned", ""},
		"image null":              {[]tenantOpt{withValues("crm", "image: null")}, crm + ".image", "platform-owned", ""},
		"capsule code":            {[]tenantOpt{withValues("crm", "capsule: {code: GLOBEX}")}, crm + ".capsule", "reserved", "GLOBEX"},
		"capsule title case":      {[]tenantOpt{withValues("crm", "Capsule: {code: GLOBEX}")}, crm + ".Capsule", "platform-owned", "GLOBEX"},
		"nats url":                {[]tenantOpt{withValues("crm", "nats: {url: 'nats://evil:4222'}")}, crm + ".nats", "platform-owned", "evil"},
		"service name":            {[]tenantOpt{withValues("crm", "service: {name: itsm}")}, crm + ".service", "platform-owned", ""},
		"pod security context":    {[]tenantOpt{withValues("crm", "podSecurityContext: {runAsUser: 0}")}, crm + ".podSecurityContext", "platform-owned", ""},
		"nested security context": {[]tenantOpt{withValues("crm", "worker: {securityContext: {privileged: true}}")}, crm + ".worker.securityContext", "platform-owned", ""},
		"service account":         {[]tenantOpt{withValues("crm", "serviceAccount: {name: default}")}, crm + ".serviceAccount", "platform-owned", ""},
		"host network":            {[]tenantOpt{withValues("crm", "hostNetwork: true")}, crm + ".hostNetwork", "platform-owned", ""},
		"host path volume":        {[]tenantOpt{withValues("crm", "volumes: [{name: root, hostPath: {path: /}}]")}, crm + ".volumes", "platform-owned", ""},
		// Tier limits, every tier.
		"replicas above starter":     {[]tenantOpt{withValues("crm", "replicaCount: 7")}, crm + ".replicaCount", "at most 4: the limit of the Starter tier", ""},
		"replicas 40 digits":         {[]tenantOpt{withValues("crm", "replicaCount: 1234567890123456789012345678901234567890")}, crm + ".replicaCount", "at most 4", ""},
		"replicas as string":         {[]tenantOpt{withValues("crm", "replicaCount: '2'")}, crm + ".replicaCount", "whole number", ""},
		"replicas fraction":          {[]tenantOpt{withValues("crm", "replicaCount: 1.5")}, crm + ".replicaCount", "whole number", ""},
		"replicas negative":          {[]tenantOpt{withValues("crm", "replicaCount: -1")}, crm + ".replicaCount", "whole number", ""},
		"nested replicas customer":   {[]tenantOpt{withTier(evav1.TierCustomer), withValues("crm", "worker: {replicaCount: 50}")}, crm + ".worker.replicaCount", "at most 5: the limit of the Customer tier", ""},
		"replicas above platform":    {[]tenantOpt{withTier(evav1.TierPlatform), withValues("crm", "replicaCount: 21")}, crm + ".replicaCount", "at most 20: the limit of the Platform tier", ""},
		"disk limit starter":         {[]tenantOpt{withValues("crm", "resources: {limits: {ephemeral-storage: 100Gi}}")}, crm + ".resources.limits.ephemeral-storage", "at most 2Gi: the limit of the Starter tier", ""},
		"cpu limit enterprise":       {[]tenantOpt{withTier(evav1.TierEnterprise), withValues("shell", "resources: {limits: {cpu: 64}}")}, "spec.helmValues[shell].resources.limits.cpu", "at most 4: the limit of the Enterprise tier", ""},
		"memory request platform":    {[]tenantOpt{withTier(evav1.TierPlatform), withValues("forge", "resources: {requests: {memory: 1Ti}}")}, "spec.helmValues[forge].resources.requests.memory", "at most 32Gi", ""},
		"memory limit starter milli": {[]tenantOpt{withValues("crm", "resources: {limits: {memory: 2049Mi}}")}, crm + ".resources.limits.memory", "at most 2Gi", ""},
		"unparsable quantity":        {[]tenantOpt{withValues("crm", "resources: {limits: {memory: lots}}")}, crm + ".resources.limits.memory", "must be a quantity", "lots"},
		"gpu request":                {[]tenantOpt{withValues("crm", "resources: {limits: {nvidia.com/gpu: 1}}")}, crm + ".resources.limits.nvidia.com/gpu", "supported values", ""},
		"resource claims":            {[]tenantOpt{withValues("crm", "resources: {claims: [{name: gpu}]}")}, crm + ".resources.claims", "supported values", ""},
		// valuesFrom, whatever it reads and wherever it writes: helm-controller parses the
		// value as --set input (issue 32.3).
		"valuesFrom Secret":                {[]tenantOpt{withValuesFrom("crm", evav1.ValuesKindSecret, "devusr-crm-db", "database.password")}, "spec.valuesFrom[0]", "valuesFrom is refused", ""},
		"valuesFrom ConfigMap":             {[]tenantOpt{withValuesFrom("crm", evav1.ValuesKindConfigMap, "devusr-branding", "branding.theme")}, "spec.valuesFrom[0]", "valuesFrom is refused", ""},
		"valuesFrom into image.repository": {[]tenantOpt{withValuesFrom("crm", evav1.ValuesKindSecret, "devusr-crm-db", "image.repository")}, "spec.valuesFrom[0]", "spec.secretMounts", ""},
		// secretMounts: the values key is Eva's, and each mount names a module of the tier
		// and one of the tenant's Secrets, once.
		"helmValues secretMounts":          {[]tenantOpt{withValues("crm", `{"secretMounts": [{"name": "x", "secretName": "globex-db"}]}`)}, crm + ".secretMounts", "platform-owned", "globex-db"},
		"helmValues SecretMounts folded":   {[]tenantOpt{withValues("crm", `{"SecretMounts": []}`)}, crm + ".SecretMounts", "platform-owned", ""},
		"secretMounts module outside tier": {[]tenantOpt{withSecretMount("forge", "crm-db")}, "spec.secretMounts[0].module", `Unsupported value: "forge"`, ""},
		"secretMounts module missing":      {[]tenantOpt{withSecretMount("", "crm-db")}, "spec.secretMounts[0].module", "Required", ""},
		"secretMounts secret upper case":   {[]tenantOpt{withSecretMount("crm", "Crm_DB")}, "spec.secretMounts[0].secret", "must be the name of one of spec.secrets", ""},
		"secretMounts secret too long":     {[]tenantOpt{withSecretMount("crm", strings.Repeat("a", 33))}, "spec.secretMounts[0].secret", "at most 32", ""},
		"secretMounts secret missing":      {[]tenantOpt{withSecretMount("crm", "")}, "spec.secretMounts[0].secret", "Required", ""},
		"secretMounts duplicate":           {[]tenantOpt{withSecretMount("crm", "crm-db"), withSecretMount("crm", "crm-db")}, "spec.secretMounts[1]", "same mount as spec.secretMounts[0]", ""},
		// Codes whose host names a platform service (issue 32, item 6).
		"code ARGOCD": {[]tenantOpt{withCode("ARGOCD")}, "spec.capsuleCode", "reserved", ""},
		"code STATUS": {[]tenantOpt{withCode("STATUS")}, "spec.capsuleCode", "reserved", ""},
		"code SYSTEM": {[]tenantOpt{withCode("SYSTEM")}, "spec.capsuleCode", "reserved", ""},
		// Strict semantic versions.
		"pin with leading-zero pre-release": {[]tenantOpt{withPin("crm", "1.0.0-01")}, "spec.versions[crm]", "semantic version", ""},
		"pin with leading-zero part":        {[]tenantOpt{withPin("crm", "1.0.0-rc.01")}, "spec.versions[crm]", "semantic version", ""},
	}
	if len(cases) < 25 {
		t.Fatalf("only %d hostile cases", len(cases))
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs := c.Validate(hostileTenant(t, tc.opts...))
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1 at %s: %v", len(errs), tc.path, errs)
			}
			e := errs[0]
			if e.Field != tc.path || !strings.Contains(e.Error(), tc.msg) {
				t.Errorf("got %q at %s, want %q at %s", e.Error(), e.Field, tc.msg, tc.path)
			}
			if tc.planted != "" && strings.Contains(e.Error(), tc.planted) {
				t.Errorf("error message leaks the value: %s", e.Error())
			}
		})
	}
}

// TestOrdinaryValuesPass guards against false positives: everyday values, settings of
// secrets that are not secrets, Secrets mounted into a module (the same Secret into two
// modules, two Secrets into one), and values within the tier.
func TestOrdinaryValuesPass(t *testing.T) {
	c := DefaultCatalog()
	values := map[evav1.Tier]string{
		evav1.TierStarter: `
replicaCount: 4
logLevel: info
features: {campaigns: true, beta: false}
password: {minLength: 8, requireSymbols: true}
passwordMinLength: 12
token: {enabled: true, ttlSeconds: 3600}
tokenTTL: 3600
existingSecret: crm-db
existingSecretPasswordKey: password
auth: {secretName: crm-auth, issuer: 'https://auth.example.com/realms/eva', clientId: eva-crm-frontend}
db: {passwordFile: /run/secrets/db-password, host: db.eva-tenant-devusr.svc.cluster.local, port: 5432, sslMode: require}
tls: {keyPath: /etc/tls/tls.key, certFile: tls.crt}
publicUrl: 'https://crm.example.com/app?tab=2&sort=desc'
webhookUrl: 'https://hooks.example.com/v1/Customers/Events'
contact: admin@example.com
repo: 'git@github.com:aidonow/eva.git'
tools: {helper: 'busybox:1.36@sha256:9b1f2d3c4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9'}
build: {commit: 3f2a9c0d1e4b5a6978877665544332211aabbccd, version: 1.4.0-rc.1+build.5}
tenantId: 123e4567-e89b-12d3-a456-426614174000
cron: '*/5 * * * *'
timezone: Europe/Amsterdam
model: whisper-large-v3-turbo-2024-10-01
bucket: eva-globex-backups-eu-west-1
description: The quick brown fox jumps over the lazy dog, 42 times!
resources: {requests: {cpu: 250m, memory: 256Mi}, limits: {cpu: 1, memory: 2Gi, ephemeral-storage: 1Gi}}
worker: {replicaCount: 2, image2: none}
rateLimit: {requestsPerSecond: 50}
containerPort: 8080
`,
		evav1.TierEnterprise: "replicaCount: 10\nresources: {limits: {cpu: '4', memory: 16Gi}}\n",
		evav1.TierPlatform:   "replicaCount: 20\nresources: {limits: {cpu: 8000m, memory: 32Gi}}\n",
	}
	for tier, v := range values {
		t.Run(string(tier), func(t *testing.T) {
			tn := hostileTenant(t, withTier(tier), withValues("crm", v), withPin("crm", "v1.4.0-rc.1"),
				withSecretMount("crm", "crm-db"), withSecretMount("crm", "crm-tls"), withSecretMount("itsm", "crm-db"))
			if errs := c.Validate(tn); len(errs) != 0 {
				t.Errorf("ordinary values refused: %v", errs)
			}
		})
	}
}

// TestSecretReason covers the exported function evactl diff redacts with: it recurses
// into maps and lists, and its reasons never hold the value.
func TestSecretReason(t *testing.T) {
	cases := []struct {
		key   string
		value any
		want  string
	}{
		{"password", 84736251.0, "password-like key holding a number"},
		{"password", true, ""},
		{"minLength", 8.0, ""},
		{"db", map[string]any{"url": "postgres://admin:hunter2@db/x"}, "URL with credentials"},
		{"hosts", []any{"a.example.com", map[string]any{"auth": map[string]any{"bearer": jwt}}}, "key names a secret"},
		{"passwords", []any{"x"}, "key names a secret"},
		{"tokens", []any{jwt}, "looks like a JWT"},
		{"tag", "1.4.0", ""},
		{"memory", "512Mi", ""},
		{"pin", nil, ""},
		{"data", "c2VjcmV0LWRhdGEtdGhhdC1zaG91bGQtbm90LWJlLWhlcmUtMTIzNDU2Nzg5MA==", "high-entropy"},
	}
	for _, tc := range cases {
		got := SecretReason(tc.key, tc.value)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("SecretReason(%q, %v) = %q, want %q", tc.key, tc.value, got, tc.want)
		}
	}
}

// TestPlacementHeldToTheCRD refuses in tenant files what the API server refuses of
// spec.placement (a cell that is not a DNS label, more than 16 labels), and labels no
// cell could carry, so that the pull request and kubectl apply read a tenant alike.
func TestPlacementHeldToTheCRD(t *testing.T) {
	c, err := LoadCatalog("")
	if err != nil {
		t.Fatal(err)
	}
	many := map[string]string{}
	for i := range 17 {
		many[fmt.Sprintf("l%d", i)] = "x"
	}
	for name, tc := range map[string]struct {
		pl   evav1.Placement
		want string
	}{
		"good":        {evav1.Placement{Cell: "eu-1", Labels: map[string]string{"region": "eu"}}, ""},
		"cell case":   {evav1.Placement{Cell: "EU-1"}, "spec.placement.cell"},
		"cell path":   {evav1.Placement{Cell: "../eu"}, "spec.placement.cell"},
		"label key":   {evav1.Placement{Labels: map[string]string{"region eu": "x"}}, "spec.placement.labels"},
		"label value": {evav1.Placement{Labels: map[string]string{"region": "e u"}}, "spec.placement.labels[region]"},
		"too many":    {evav1.Placement{Labels: many}, "spec.placement.labels: Too many"},
	} {
		tn := hostileTenant(t)
		tn.Spec.Placement = &tc.pl
		errs := c.Validate(tn)
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s: refused: %v", name, errs)
		case tc.want != "" && !strings.Contains(fmt.Sprint(errs), tc.want):
			t.Errorf("%s: %v, want %q", name, errs, tc.want)
		}
	}
}
