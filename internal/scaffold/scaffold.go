// Package scaffold makes the files of a new fleet repository (evactl init): the project
// file, one environment, one example tenant, SOPS creation rules per tenant with the
// tenant's own age key, and the pull-request workflow. Files is pure: the command
// writes what it returns.
package scaffold

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/aidonow/eva/internal/tenantfile"
	"github.com/aidonow/eva/internal/tenantkey"
)

// ExampleCode is the example tenant's capsule code.
const ExampleCode = "EXAMPL"

// Options say what to scaffold.
type Options struct {
	// Release is the Eva release the fleet uses (its eva: field): the released
	// environments and module charts the fleet does not hold come from it.
	Release string
	// Env names the one environment the fleet holds; Domain is its tenants' parent
	// domain.
	Env, Domain string
	// ChartsURL is the OCI repository of the module charts (chartSource.url).
	ChartsURL string
	// Recipient is the example tenant's age public key; KeyFile where its private
	// key was written (git-ignored), for the instructions.
	Recipient, KeyFile string
	// Owners are the code owners (GitHub users or teams) of everything but the tenant
	// files: who must approve a change to how every tenant is rendered and checked.
	Owners string
}

var (
	envRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	domainRE = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,63}$`)
)

// Check refuses options that would scaffold a fleet evactl then refuses.
func (o Options) Check() error {
	if !envRE.MatchString(o.Env) {
		return fmt.Errorf("--env %q: an environment name is lower-case letters, digits and '-'", o.Env)
	}
	if strings.TrimSpace(o.Owners) == "" || strings.ContainsAny(o.Owners, "\n#") {
		return fmt.Errorf("--owners %q: want GitHub users or teams (@org/team), space-separated", o.Owners)
	}
	if !strings.HasPrefix(o.ChartsURL, "oci://") || strings.ContainsAny(o.ChartsURL, " \n#") {
		return fmt.Errorf("--charts-url %q: want the oci:// repository of the module charts", o.ChartsURL)
	}
	if !domainRE.MatchString(o.Domain) {
		return fmt.Errorf("--domain %q: want a DNS domain such as dev.example.com (tenants get <code>.<domain>)", o.Domain)
	}
	return nil
}

// Files returns the new repository's files by slash-separated path.
func Files(o Options) map[string]string {
	env := path.Join("overlays", o.Env, "tenant")
	files := map[string]string{
		"eva.yaml":                                projectFile(o),
		path.Join(env, "environment.yaml"):        environmentFile(o),
		path.Join(env, "kustomization.yaml"):      kustomizationFile,
		path.Join("tenants", ExampleCode+".yaml"): tenantFile,
		".sops.yaml":                              sopsRules(o),
		".gitignore":                              gitignore(o),
		".github/workflows/validate-tenants.yaml": workflow(o),
		".github/CODEOWNERS":                      codeOwners(o),
	}
	return files
}

func projectFile(o Options) string {
	release := "# eva: names no release: every environment and module chart is this repository's.\n"
	if o.Release != "" {
		release = fmt.Sprintf(`# The Eva release this fleet uses: the environments and module charts this repository
# does not hold come from it (evactl carries them), and evactl of another release
# refuses to run here. A folder here replaces the released one of its name.
eva: %s
`, o.Release)
	}
	return `# The fleet's project file: evactl finds it by walking up from the working directory.
apiVersion: eva.aidonow.com/v1alpha1
kind: Fleet
` + release + `tenants: tenants         # tenant files, one EvaTenant per <CODE>.yaml
environments: overlays   # <name>/tenant/environment.yaml and its kustomization (patches)
charts: charts           # module charts of your own (none yet)
rollouts: rollouts       # platform releases (evactl rollout promote)
# The environment evactl uses when --env is not given, and where its render is
# published: evactl publish git, diff, validate and the pull-request workflow read them
# (flags still win). Uncomment publish once the repository Flux reads exists; for an
# OCI artifact write ref: oci://HOST/REPO:TAG instead of repo, branch and path.
environment: ` + o.Env + `
# publish:
#   repo: https://github.com/OWNER/fleet-published.git
#   branch: main
#   path: clusters/` + o.Env + `
`
}

func environmentFile(o Options) string {
	return fmt.Sprintf(`# The %[1]s environment's rendering settings (docs/fleet-repository.md; every setting is
# described in docs/fleet-repository.md). Tenants are served at <code>.%[2]s.
domain: %[2]s
ingressClassName: nginx
ingressNamespace: ingress-nginx
messagingNamespace: nats
# The module charts: an OCIRepository per chart that Eva renders into each tenant's
# namespace, so that it works under Flux's multi-tenancy lockdown (--no-cross-namespace-refs
# refuses a shared source in flux-system), pinned to the digest charts/published.yaml
# records once you run evactl charts push (by tag until then). Point url at your registry
# after evactl charts push, or keep the Eva release's. A registry that needs credentials:
# pullSecret names a kubernetes.io/dockerconfigjson Secret in the operator's namespace,
# which the operator copies into each tenant namespace.
chartSource:
  kind: OCIRepository
  name: eva-charts
  url: %[5]s
# The GitRepository of what evactl publishes, in Flux's namespace.
gitopsSource:
  kind: GitRepository
  name: eva-tenants
  namespace: flux-system
seedImage: ghcr.io/aidonow/eva-seeder:0.1.0
releaseInterval: 5m
# Each tenant's SOPS-encrypted Secrets (tenants/<CODE>.<name>.sops.yaml) are encrypted
# for that tenant's own age keys, listed here and in .sops.yaml; kustomize-controller
# decrypts them with flux-system/sops-age-<code> (key identity.agekey).
secrets:
  keySecretPrefix: sops-age-
  recipients:
    %[3]s:
      - %[4]s
# What a tenant may claim (internal/entitlement): any tenant Starter or Customer, in the
# pilot or fleet wave, never frozen; beyond that only what its capsule code is granted.
# evactl refuses a tenant file past them, the operator an EvaTenant, and the admission
# policy eva-tenant-entitlements a kubectl edit. Changing them is the platform's call
# (.github/CODEOWNERS covers this file).
entitlements:
  tiers: [Starter, Customer]
  waves: [2, 3]
  # Beyond that, by capsule code: the platform's own tenants in the internal wave, a
  # customer's Enterprise contract.
  grants: {}
  #  DEVUSR: {waves: [1]}
  #  GLOBEX: {tiers: [Enterprise]}
`, o.Env, o.Domain, ExampleCode, o.Recipient, o.ChartsURL)
}

const kustomizationFile = `# Patches applied to every tenant bundle rendered for this environment. A tenant
# overlay holds patches only.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
patches: []
`

const tenantFile = `# An example tenant: Starter tier (crm and itsm), pilot rollout wave. Copy it to
# tenants/<CODE>.yaml for each tenant; evactl validate checks every field, and the
# entitlements of the environment say which tiers and waves a tenant may take.
apiVersion: eva.aidonow.com/v1alpha1
kind: EvaTenant
metadata:
  name: exampl
  namespace: eva-system
spec:
  capsuleCode: ` + ExampleCode + `
  tier: Starter
  lifecycle: Active
  seedsVersion: seeds-2026.11.0
  wave: 2
  helmValues:
    crm:
      replicaCount: 1
`

func sopsRules(o Options) string {
	rule := tenantkey.NewRule(tenantfile.SecretPathRegex("tenants", ExampleCode), []string{o.Recipient})
	return string(tenantkey.NewSopsConfig(rule))
}

func gitignore(o Options) string {
	lines := []string{"# Private keys never enter the repository.", "/" + strings.SplitN(o.KeyFile, "/", 2)[0] + "/", "/out/"}
	return strings.Join(lines, "\n") + "\n"
}

func workflow(o Options) string {
	return `# Checks every pull request as the publish after its merge will: evactl validate (tenant
# and release files, the environment, values against the module charts, annotations at
# the offending line), then evactl diff against what is published, which fails where
# publish would and posts its preview (tenants by wave and cell, fields by kind, cells'
# room, refusals) as the job's summary and a comment. The evactl installed is the
# release eva.yaml names; the environment and the publish target are eva.yaml's too
# (environment:, publish:). A token that can read the published repository goes in the
# secret EVA_GIT_TOKEN.
name: validate-tenants
on:
  pull_request:
    paths: ["tenants/**", "rollouts/**", "overlays/**", "charts/**", "eva.yaml"]
permissions:
  contents: read
  pull-requests: write
jobs:
  validate:
    runs-on: ubuntu-latest
    env:
      EVA_GIT_TOKEN: ${{ secrets.EVA_GIT_TOKEN }}
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-go@v5
        with:
          go-version: stable
      - name: Install the evactl release eva.yaml names
        run: |
          release=$(sed -n 's/^eva:[[:space:]]*v\{0,1\}\([^[:space:]#]*\).*/\1/p' eva.yaml)
          case "$release" in
            "") version=latest ;;
            *-devel*) echo "::error file=eva.yaml::eva: names $release, a development build that cannot be installed: set it to a released version of Eva"; exit 1 ;;
            *) version="v$release" ;;
          esac
          go install "github.com/aidonow/eva/cmd/evactl@$version"
      - name: evactl validate
        run: evactl validate --output github
      - name: evactl diff (fails where publish would)
        run: |
          if ! grep -q '^publish:' eva.yaml; then
            echo "::notice file=eva.yaml::no publish: target in eva.yaml: the change is not compared with what is published"
            exit 0
          fi
          status=0
          evactl diff --output markdown > preview.md || status=$?
          cat preview.md >> "$GITHUB_STEP_SUMMARY"
          # A pull request from a fork gets a token that cannot comment: the summary holds it.
          if [ -s preview.md ] && [ "$HEAD_REPO" = "$GITHUB_REPOSITORY" ]; then
            gh pr comment "$PR_NUMBER" --body-file preview.md --edit-last --create-if-none ||
              echo "::warning::the preview could not be posted as a comment"
          fi
          exit $status
        env:
          GH_TOKEN: ${{ github.token }}
          HEAD_REPO: ${{ github.event.pull_request.head.repo.full_name }}
          PR_NUMBER: ${{ github.event.pull_request.number }}
`
}

// codeOwners makes the platform team the owner of every file that decides how all the
// tenants are rendered and checked: a pull request changing one needs its review, while
// tenant files stay the tenants' (the publish's own checks still apply to them).
func codeOwners(o Options) string {
	var b strings.Builder
	b.WriteString(`# Who must approve a change (with branch protection requiring code owners' review).
# eva.yaml, the environments, the module charts, the releases and the workflow decide
# how every tenant is rendered and checked: a tenant's pull request must not change them.
`)
	for _, path := range []string{"/eva.yaml", "/overlays/", "/charts/", "/rollouts/", "/.github/", "/.sops.yaml"} {
		fmt.Fprintf(&b, "%-14s %s\n", path, o.Owners)
	}
	return b.String()
}
