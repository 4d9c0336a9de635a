package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// outputFormats are the values of -o/--output: text for people, json and yaml for
// programs, as kubectl, flux and helm take them.
var outputFormats = []string{"text", "json", "yaml"}

// checkOutput refuses an --output value outside outputFormats.
func checkOutput(output string) error {
	if !slices.Contains(outputFormats, output) {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--output %q: want text, json or yaml", output)}
	}
	return nil
}

// writeStructured writes v as JSON (indented) or YAML, as output says.
func writeStructured(w io.Writer, output string, v any) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return checkOutput(output)
}

// artifactReport is what the charts and images commands that package, push, pin or
// copy print with -o json or yaml: one item per chart version or image.
type artifactReport struct {
	Items []artifact `json:"items"`
	// Lock is the published.yaml the digests were recorded in (charts push).
	Lock string `json:"lock,omitempty"`
	// DryRun: nothing was copied (images mirror --dry-run).
	DryRun bool `json:"dryRun,omitempty"`
}

// artifact is one chart version or image a command handled.
type artifact struct {
	Chart   string `json:"chart,omitempty"`
	Version string `json:"version,omitempty"`
	// From is where it was copied from; Ref where it is now (the archive written, the
	// reference pushed, the mirror's copy).
	From   string `json:"from,omitempty"`
	Ref    string `json:"ref,omitempty"`
	Digest string `json:"digest,omitempty"`
	// Error says why it failed ("" when it did not).
	Error string `json:"error,omitempty"`
}

// outputFlag binds -o for a command whose text output is lines of what it did.
func outputFlag(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", "text", "output format: text, json or yaml (one item per chart version or image)")
}

// finishArtifacts prints the report with -o json or yaml, then returns err: a failed
// run still says what it did.
func finishArtifacts(cmd *cobra.Command, output string, rep artifactReport, err error) error {
	if output == "text" {
		return err
	}
	if rep.Items == nil {
		rep.Items = []artifact{}
	}
	if werr := writeStructured(cmd.OutOrStdout(), output, rep); werr != nil {
		return werr
	}
	return err
}
