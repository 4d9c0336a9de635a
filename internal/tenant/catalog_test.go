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
	quota := map[evav1.Tier]string{
		evav1.TierStarter:  "2/4Gi/20",
		evav1.TierCustomer: "4/8Gi/40",
	}
	for _, tier := range evav1.Tiers {
		q := c.Tiers[tier].Quota
		want, restricted := quota[tier]
		switch {
		case restricted && q == nil:
			t.Errorf("%s has no quota, want %s", tier, want)
		case restricted:
			if got := q.CPU.String() + "/" + q.Memory.String() + "/" + strconv.FormatInt(q.Pods, 10); got != want {
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
		"bad stream replicas":     {strings.Replace(base, "replicas: 1}", "replicas: 0}", 1), "tiers.Starter.streams"},
		"missing limitRange":      {strings.Replace(base, "  defaultCPU: 500m\n", "", 1), "limitRange"},
		"not yaml":                {"modules: [", "decoding"},
		"empty":                   {"", "at least one module"},
		"module name upper case":  {strings.Replace(base, "  crm:\n    chart", "  CRM:\n    chart", 1), "modules.CRM"},
		"quantity not a quantity": {strings.Replace(base, "memory: 4Gi", "memory: lots", 1), "decoding"},
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
