package tenant

import (
	"strconv"
	"strings"
	"testing"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

func TestDefaultCatalogMatchesDesign(t *testing.T) {
	c := DefaultCatalog()
	wantModules := map[evav1.Tier][]string{
		evav1.TierStarter:    {"crm", "itsm"},
		evav1.TierCustomer:   {"crm", "itsm", "whisper", "gateway"},
		evav1.TierEnterprise: {"crm", "itsm", "whisper", "forge", "shell", "gateway"},
		evav1.TierPlatform:   {"crm", "itsm", "whisper", "forge", "shell", "gateway"},
	}
	for tier, want := range wantModules {
		if got := strings.Join(c.ModulesOf(tier), ","); got != strings.Join(want, ",") {
			t.Errorf("%s modules = %s, want %s", tier, got, strings.Join(want, ","))
		}
	}
	// Every tier has a quota, limits included (requests alone let 1m requests hide
	// whole nodes of limits).
	quota := map[evav1.Tier]string{
		evav1.TierStarter:    "2/4Gi/20 limits 4/8Gi disk 20Gi",
		evav1.TierCustomer:   "4/8Gi/40 limits 8/16Gi disk 40Gi",
		evav1.TierEnterprise: "32/128Gi/120 limits 64/256Gi disk 240Gi",
		evav1.TierPlatform:   "64/256Gi/240 limits 128/512Gi disk 480Gi",
	}
	for _, tier := range evav1.Tiers {
		q := c.Tiers[tier].Quota
		want, restricted := quota[tier]
		switch {
		case restricted && q == nil:
			t.Errorf("%s has no quota, want %s", tier, want)
		case restricted:
			if got := q.CPU.String() + "/" + q.Memory.String() + "/" + strconv.FormatInt(q.Pods, 10) + " limits " + q.LimitsCPU.String() + "/" +
				q.LimitsMemory.String() + " disk " + q.EphemeralStorage.String(); got != want {
				t.Errorf("%s quota = %s, want %s", tier, got, want)
			}
		case q != nil:
			t.Errorf("%s quota = %+v, want unrestricted", tier, q)
		}
	}
	if c.LimitRange.DefaultCPU.String() != "500m" || c.LimitRange.DefaultMemory.String() != "512Mi" {
		t.Errorf("limit range defaults = %s/%s, want 500m/512Mi", &c.LimitRange.DefaultCPU, &c.LimitRange.DefaultMemory)
	}
	for _, name := range []string{"crm", "itsm", "whisper", "forge", "shell", "gateway"} {
		if m := c.Modules[name]; m.Chart != "eva-"+name || !semverRE.MatchString(m.Version) {
			t.Errorf("module %s = %+v", name, m)
		}
	}
}

func TestParseCatalogRejectsBadCatalogs(t *testing.T) {
	base := string(defaultCatalogYAML)
	cases := map[string]struct {
		yaml, want string
	}{
		"unknown field":           {strings.Replace(base, "limitRange:", "limitRanges:", 1), "unknown field"},
		"module not in catalog":   {strings.Replace(base, "modules: [crm, itsm]", "modules: [crm, erp]", 1), `"erp" is not a module`},
		"module listed twice":     {strings.Replace(base, "modules: [crm, itsm]", "modules: [crm, crm]", 1), "listed twice"},
		"bad default version":     {strings.Replace(base, "version: 1.4.0", "version: latest", 1), "modules.crm.version"},
		"unknown tier":            {strings.Replace(base, "  Platform:", "  Gold:", 1), "tiers.Gold: unknown tier"},
		"non-positive quota":      {strings.Replace(base, `cpu: "2"`, `cpu: "0"`, 1), "tiers.Starter.quota"},
		"tier without quota":      {strings.Replace(base, `    quota: {cpu: "2", memory: 4Gi, pods: 20, limitsCPU: "4", limitsMemory: 8Gi, ephemeralStorage: 20Gi}`+"\n", "", 1), "tiers.Starter.quota: required"},
		"bad stream replicas":     {strings.Replace(base, "replicas: 1}", "replicas: 0}", 1), "tiers.Starter.streams"},
		"missing limitRange":      {strings.Replace(base, "  defaultCPU: 500m\n", "", 1), "limitRange"},
		"not yaml":                {"modules: [", "decoding"},
		"empty":                   {"", "at least one module"},
		"module name upper case":  {strings.Replace(base, "  crm:\n    chart", "  CRM:\n    chart", 1), "modules.CRM"},
		"quantity not a quantity": {strings.Replace(base, "memory: 4Gi", "memory: lots", 1), "decoding"},
		"tier without limits":     {strings.Replace(base, `    valueLimits: {maxReplicas: 10, maxCPU: "4", maxMemory: 16Gi, maxEphemeralStorage: 8Gi}`+"\n", "", 1), "tiers.Enterprise.valueLimits"},
		"limits above quota":      {strings.Replace(base, "maxReplicas: 5,", "maxReplicas: 11,", 1), "exceed the quota of 40 pods"},
		"zero replica limit":      {strings.Replace(base, "maxReplicas: 20", "maxReplicas: 0", 1), "tiers.Platform.valueLimits"},
		"no disk limit":           {strings.Replace(base, ", maxEphemeralStorage: 2Gi}", "}", 1), "tiers.Starter.valueLimits"},
		"no default disk":         {strings.Replace(base, "  defaultEphemeralStorage: 1Gi\n", "", 1), "limitRange"},
		"owned path not a path":   {strings.Replace(base, "  - nats\n", "  - nats..url\n", 1), "platformOwned"},
		"module owned not a path": {strings.Replace(base, "    description: Speech transcription\n", "    description: Speech transcription\n    platformOwned: [\"a b\"]\n", 1), "modules.whisper.platformOwned"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseCatalog([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestNaming(t *testing.T) {
	cases := map[string][2]string{
		"namespace":        {Namespace("DEVUSR"), "eva-tenant-devusr"},
		"events stream":    {EventsStream("DEVUSR"), "eva-DEVUSR-events"},
		"commands stream":  {CommandsStream("DEVUSR"), "eva-DEVUSR-commands"},
		"events subject":   {EventsSubject("DEVUSR"), "capsule.DEVUSR.events.>"},
		"commands subject": {CommandsSubject("DEVUSR"), "capsule.DEVUSR.commands.>"},
		"stream object":    {StreamObjectName(EventsStream("DEVUSR")), "eva-devusr-events"},
		"ingress":          {IngressName("DEVUSR"), "eva-devusr"},
		"host":             {Host("DEVUSR", "eva.example.com"), "devusr.eva.example.com"},
	}
	for name, c := range cases {
		if c[0] != c[1] {
			t.Errorf("%s = %q, want %q", name, c[0], c[1])
		}
	}
}

func TestEveryTierHasValueLimits(t *testing.T) {
	c := DefaultCatalog()
	for _, tier := range evav1.Tiers {
		l := c.Tiers[tier].ValueLimits
		if l.MaxReplicas < 1 || l.MaxCPU.Sign() <= 0 || l.MaxMemory.Sign() <= 0 {
			t.Errorf("%s has no value limits: %+v", tier, l)
		}
	}
}

// TestModulePlatformOwned: a module's own platformOwned list binds that module only.
func TestModulePlatformOwned(t *testing.T) {
	data := strings.Replace(string(defaultCatalogYAML), "    description: Customer relationship management\n",
		"    description: Customer relationship management\n    platformOwned: [features.billing, \"**.adminUsers\"]\n", 1)
	c, err := ParseCatalog([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	values := "features: {billing: true}\nteam: {adminUsers: [me]}\n"
	errs := c.Validate(hostileTenant(t, withValues("crm", values), withValues("itsm", values)))
	if len(errs) != 2 || errs[0].Field != "spec.helmValues[crm].features.billing" ||
		errs[1].Field != "spec.helmValues[crm].team.adminUsers" {
		t.Fatalf("got %v, want features.billing and team.adminUsers of crm refused, itsm accepted", errs)
	}
	// A scalar where the platform owns keys below replaces them.
	errs = c.Validate(hostileTenant(t, withValues("crm", "features: null\n")))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "replaces features.billing") {
		t.Fatalf("got %v, want features: null refused", errs)
	}
}

func TestStrictSemver(t *testing.T) {
	valid := []string{"1.0.0", "v1.4.0", "0.0.0", "1.0.0-0", "1.0.0-rc.1", "1.0.0-0a", "1.0.0-alpha-1", "1.0.0+001", "v2.1.0-rc.1+b5", "10.20.30"}
	invalid := []string{"1.0.0-01", "1.0.0-rc.01", "01.0.0", "1.0", "1.0.0-", "1.0.0-rc..1", "latest", "V1.0.0", "1.0.0+", "vv1.0.0"}
	for _, v := range valid {
		if !semverRE.MatchString(v) {
			t.Errorf("%q refused, want accepted", v)
		}
	}
	for _, v := range invalid {
		if semverRE.MatchString(v) {
			t.Errorf("%q accepted, want refused", v)
		}
	}
}
