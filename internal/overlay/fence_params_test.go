package overlay

import (
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/aidonow/eva/internal/docsection"
)

// TestFenceParamsFollowTheEnvironment: each shipped deployment of the operator
// (overlays/<env>) installs the ConfigMap eva-tenant-ingress, which the admission policy
// eva-tenant-ingresses holds tenant Ingresses to, with exactly the domain, class and
// annotation keys the environment renders, and their digest: were they to differ, every
// tenant Ingress would be refused, or the fence would allow what Eva never renders.
func TestFenceParamsFollowTheEnvironment(t *testing.T) {
	root := filepath.Join("..", "..", "overlays")
	for _, name := range []string{"dev", "prod", "airgap"} {
		t.Run(name, func(t *testing.T) {
			env, err := Load(root, name)
			if err != nil {
				t.Fatal(err)
			}
			data := installedConfigMap(t, filepath.Join(root, name), "eva-tenant-ingress")
			want := env.Settings.FenceParams()
			if !maps.Equal(data, want) {
				t.Errorf("overlays/%s installs eva-system/eva-tenant-ingress %v, the environment renders %v", name, data, want)
			}
		})
	}
}

// TestReservedCodesAreCapsuleCodes: reservedCodes holds capsule codes only, so that a
// typo reserves nothing silently.
func TestReservedCodesAreCapsuleCodes(t *testing.T) {
	s, err := ParseSettings([]byte(minimalSettings + "reservedCodes: [GRAFNA]\n"))
	if err != nil || !s.Reserves("GRAFNA") || s.Reserves("ACMECO") {
		t.Fatalf("reservedCodes [GRAFNA]: %v", err)
	}
	if _, err := ParseSettings([]byte(minimalSettings + "reservedCodes: [grafana]\n")); err == nil ||
		!strings.Contains(err.Error(), `reservedCodes[0]: "grafana" is not a capsule code`) {
		t.Errorf("a code in lower case: %v", err)
	}
}

// TestEntitlementParamsFollowTheEnvironment: the ConfigMap eva-tenant-entitlements each
// shipped overlay installs, which the admission policy eva-tenant-entitlements reads on
// the kubectl path, says what the environment's entitlements say, as evactl and the
// operator read them.
func TestEntitlementParamsFollowTheEnvironment(t *testing.T) {
	root := filepath.Join("..", "..", "overlays")
	for _, name := range []string{"dev", "prod", "airgap"} {
		t.Run(name, func(t *testing.T) {
			env, err := Load(root, name)
			if err != nil {
				t.Fatal(err)
			}
			data := installedConfigMap(t, filepath.Join(root, name), "eva-tenant-entitlements")
			if want := env.Settings.Entitlements.Params(); !maps.Equal(data, want) {
				t.Errorf("overlays/%s installs eva-system/eva-tenant-entitlements %v, the environment's entitlements say %v", name, data, want)
			}
		})
	}
}

// TestDocumentedEntitlementsAreValid: the entitlements block docs/fleet-repository.md
// shows is read by the environment as written, and holds the grants it describes.
func TestDocumentedEntitlementsAreValid(t *testing.T) {
	blocks, err := docsection.Blocks(filepath.Join("..", "..", "docs", "fleet-repository.md"), "Entitlements", "yaml")
	if err != nil || len(blocks) != 1 {
		t.Fatalf("the Entitlements section's YAML block: %d blocks, %v", len(blocks), err)
	}
	s, err := ParseSettings([]byte(minimalSettings + blocks[0].Text))
	if err != nil {
		t.Fatalf("the documented entitlements: %v\n%s", err, blocks[0].Text)
	}
	if p := s.Entitlements.Params(); p["tier.Enterprise"] != "GLOBEX@team-globex" || p["wave.1"] != "DEVUSR,PLATFM" || p["freeze"] != "PLATFM" || p["tier.Starter"] != "*" {
		t.Errorf("the documented entitlements read as %v", p)
	}
	if e := s.Entitlements; e.MaxTenants != 500 || e.MaxTenantsPerNamespace != 20 || !e.Grants["PLATFM"].NoQuota {
		t.Errorf("the documented caps and exemption read as %+v", e)
	}
}

// installedConfigMap is the data of the ConfigMap eva-system/name an overlay installs
// (kustomize build of dir), nil when it installs none.
func installedConfigMap(t *testing.T, dir, name string) map[string]string {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range resources.Resources() {
		if res.GetKind() == "ConfigMap" && res.GetName() == name && res.GetNamespace() == "eva-system" {
			return res.GetDataMap()
		}
	}
	return nil
}

// TestNATSConsumerSettings: the consumer receives tenants' events subjects alone, and only
// from the accounts natsAccounts makes; each refusal names the field.
// The block docs/messaging.md shows is read as written.
func TestNATSConsumerSettings(t *testing.T) {
	blocks, err := docsection.Blocks(filepath.Join("..", "..", "docs", "messaging.md"), "A platform consumer of tenant events", "yaml")
	if err != nil || len(blocks) != 1 {
		t.Fatalf("the consumer section's YAML block: %d blocks, %v", len(blocks), err)
	}
	s, err := ParseSettings([]byte(minimalSettings + blocks[0].Text))
	if err != nil {
		t.Fatalf("the documented consumer: %v\n%s", err, blocks[0].Text)
	}
	if got := s.NATSConsumer.Subjects; len(got) != 1 || got[0] != "events.>" {
		t.Errorf("subjects %v", got)
	}
	if _, err := ParseSettings([]byte(minimalSettings + "natsAccounts: true\nnatsConsumer: {subjects: [events.orders.*, events.payments.>]}\n")); err != nil {
		t.Errorf("a consumer of some events: %v", err)
	}
	for doc, want := range map[string]string{
		"natsConsumer: {subjects: [events.>]}\n":                                      "natsConsumer: receives from the tenants' own NATS accounts: needs natsAccounts: true",
		"natsAccounts: true\nnatsConsumer: {}\n":                                      "natsConsumer.subjects: required",
		"natsAccounts: true\nnatsConsumer: {subjects: [commands.>]}\n":                `natsConsumer.subjects[0]: "commands.>": a consumer receives a tenant's events`,
		"natsAccounts: true\nnatsConsumer: {subjects: [\">\"]}\n":                     `natsConsumer.subjects[0]: ">": a consumer receives a tenant's events`,
		"natsAccounts: true\nnatsConsumer: {subjects: [events.>.x]}\n":                `natsConsumer.subjects[0]: "events.>.x": token 2 (">")`,
		"natsAccounts: true\nnatsConsumer: {subjects: [\"events.a b\"]}\n":            `token 2 ("a b")`,
		"natsAccounts: true\nnatsConsumer: {subjects: [events.>, events.orders.*]}\n": `natsConsumer.subjects[1]: "events.orders.*" overlaps subjects[0] "events.>"`,
		"natsAccounts: true\nnatsConsumer: {subjects: [events.a, events.a]}\n":        `natsConsumer.subjects[1]: "events.a" overlaps`,
	} {
		if _, err := ParseSettings([]byte(minimalSettings + doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", doc, err, want)
		}
	}
}
