package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// addCompletions gives the shell completion (evactl completion bash|zsh|fish) the
// values that exist: environments for --env (from --overlays), release names for the
// rollout commands' argument (from --rollouts) and kubeconfig contexts for --context.
// Walked over the tree, so every command with such a flag completes it.
func addCompletions(cmd *cobra.Command) {
	if cmd.Flags().Lookup("env") != nil {
		_ = cmd.RegisterFlagCompletionFunc("env", func(c *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
			_ = useFleet(c)
			return environmentNames(c, flagOr(c, "overlays", "overlays")), cobra.ShellCompDirectiveNoFileComp
		})
	}
	if cmd.Flags().Lookup("context") != nil {
		_ = cmd.RegisterFlagCompletionFunc("context", func(c *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
			return kubeContexts(flagOr(c, "kubeconfig", "")), cobra.ShellCompDirectiveNoFileComp
		})
	}
	if cmd.Parent() != nil && cmd.Parent().Name() == "rollout" && cmd.Flags().Lookup("rollouts") != nil {
		cmd.ValidArgsFunction = func(c *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return releaseNames(flagOr(c, "rollouts", "rollouts")), cobra.ShellCompDirectiveNoFileComp
		}
	}
	for _, sub := range cmd.Commands() {
		addCompletions(sub)
	}
}

// flagOr is a flag's value as typed so far, or def when it is empty.
func flagOr(c *cobra.Command, name, def string) string {
	if f := c.Flags().Lookup(name); f != nil && f.Value.String() != "" {
		return f.Value.String()
	}
	return def
}

// kubeContexts lists the contexts of the kubeconfig kubectl would read.
func kubeContexts(kubeconfig string) []string {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := rules.Load()
	if err != nil {
		return nil
	}
	var out []string
	for name := range cfg.Contexts {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// maxCompletionFile bounds the release files completion reads.
const maxCompletionFile = 1 << 20

// releaseNames lists the release names of the files in a folder of release files, read
// without validating them (a completion must not fail on a file being edited).
func releaseNames(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".yaml")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if info, err := e.Info(); err == nil && info.Size() <= maxCompletionFile {
			if data, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil {
				if n := metadataName(data); n != "" {
					name = n
				}
			}
		}
		// The shell reads each line as a candidate: a name that is not one an EvaRollout
		// can have (a newline, an escape) is not offered.
		if len(validation.IsDNS1123Subdomain(name)) == 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// metadataName is a release file's metadata.name, "" when it does not read.
func metadataName(data []byte) string {
	var doc struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if yaml.Unmarshal(data, &doc) != nil {
		return ""
	}
	return doc.Metadata.Name
}
