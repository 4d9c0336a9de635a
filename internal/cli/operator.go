package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"

	"github.com/spf13/cobra"
	yaml "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/aidonow/eva/internal/chartrepo"
	"github.com/aidonow/eva/internal/manifest"
	"github.com/aidonow/eva/internal/overlay"
)

// newOperatorCommand groups what evactl tells the operator's installation.
func newOperatorCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Values for installing the operator's chart with the fleet's environment",
	}
	cmd.AddCommand(newOperatorValuesCommand())
	return cmd
}

// operatorValuesOptions are the flags of evactl operator values.
type operatorValuesOptions struct{ env, overlays, charts string }

func newOperatorValuesCommand() *cobra.Command {
	o := operatorValuesOptions{}
	cmd := &cobra.Command{
		Use:   "values",
		Short: "Print the operator chart's values (env, environmentFiles) for an environment of the fleet",
		Long: `Print, as a Helm values file, the environment evactl renders the fleet's tenants with:
its name (env) and the files of its tenant folder (environmentFiles), byte for byte, and
the charts' published.yaml (publishedCharts), whose digests each tenant's chart sources
pin when the operator renders them. The
operator's chart installed with them renders with the same environment, and the cluster's
fences (the ConfigMap eva-tenant-ingress: domain, ingress class, annotation keys and
their digest) enforce what evactl renders, so that a tenant Ingress is admitted. Without
them the chart uses the environment of its own name that Eva ships, whose domain is not
the fleet's.

  evactl operator values --env prod > eva-operator-env.yaml
  helm upgrade --install eva-operator oci://<registry>/charts/eva-operator -n eva-system \
    -f eva-operator-env.yaml`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runOperatorValues(cmd, o)
		},
	}
	cmd.Flags().StringVar(&o.env, "env", "dev", "the environment under --overlays (or the fleet's release) the operator renders with")
	cmd.Flags().StringVar(&o.overlays, "overlays", "overlays", "folder of environment overlays")
	cmd.Flags().StringVar(&o.charts, "charts", "charts", "folder of module charts, whose "+chartrepo.LockFile+" gives the digests the chart sources pin")
	return cmd
}

func runOperatorValues(cmd *cobra.Command, o operatorValuesOptions) error {
	env, err := loadEnvironment(cmd, o.overlays, o.env)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	values, err := env.ChartValues()
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	lockPath := filepath.Join(o.charts, chartrepo.LockFile)
	switch published, err := os.ReadFile(lockPath); {
	case err == nil:
		if _, err := chartrepo.ReadLock(lockPath); err != nil {
			return &ExitError{Code: ExitUsage, Err: err}
		}
		values["publishedCharts"] = string(published)
	case !errors.Is(err, fs.ErrNotExist):
		return &ExitError{Code: ExitUsage, Err: err}
	case env.Settings.ChartSource.RequireDigest:
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%s: environment %s pins every chart by digest (chartSource.requireDigest), and there is no %s: run evactl charts push, or pass --charts", lockPath, env.Name, chartrepo.LockFile)}
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# The eva-operator chart's values for environment %s, written by evactl operator values:\n", env.Name)
	fmt.Fprintf(&buf, "# install the chart with them (-f) so that the operator and the cluster's fences use the\n")
	fmt.Fprintf(&buf, "# environment evactl renders with. Fence digest %s.\n", env.Settings.FenceParams()[overlay.FenceDigestKey])
	encoded, err := encodeChartValues(values)
	if err != nil {
		return err
	}
	buf.Write(encoded)
	_, err = cmd.OutOrStdout().Write(buf.Bytes())
	return err
}

// encodeChartValues writes the values with each file as a literal block, for a person
// to read in review, and checks that Helm's reading of the text (sigs.k8s.io/yaml) gives
// back every file byte for byte; where it would not (a line ending in spaces, say), the
// values are written with quoted strings instead.
func encodeChartValues(values map[string]any) ([]byte, error) {
	files, _ := values["environmentFiles"].(map[string]any)
	node := &yaml.Node{Kind: yaml.MappingNode}
	node.Content = append(node.Content, scalar("env", 0), scalar(values["env"].(string), 0), scalar("environmentFiles", 0))
	fileNodes := &yaml.Node{Kind: yaml.MappingNode}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		fileNodes.Content = append(fileNodes.Content, scalar(name, 0), scalar(files[name].(string), yaml.LiteralStyle))
	}
	node.Content = append(node.Content, fileNodes)
	if published, ok := values["publishedCharts"].(string); ok {
		node.Content = append(node.Content, scalar("publishedCharts", 0), scalar(published, yaml.LiteralStyle))
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(node); err != nil {
		return nil, fmt.Errorf("encoding the chart's values: %w", err)
	}
	literal := out.Bytes()
	var back map[string]any
	if err := sigsyaml.Unmarshal(literal, &back); err == nil && reflect.DeepEqual(back, values) {
		return literal, nil
	}
	var quoted bytes.Buffer
	if err := manifest.Encode(&quoted, values); err != nil {
		return nil, fmt.Errorf("encoding the chart's values: %w", err)
	}
	return quoted.Bytes(), nil
}

func scalar(value string, style yaml.Style) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value, Style: style}
}
