package cli

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aidonow/eva/internal/render"
)

// stdoutOut is the --out that streams the manifests to standard output.
const stdoutOut = "-"

// renderToStdout writes the render's manifests to standard output, as kustomize build
// does: the tree's files in path order, each after a "# Source: <path>" comment,
// without its kustomization.yaml files (kustomize's, not the cluster's) and its
// SOPS-encrypted Secrets (only a comment names them). Nothing is
// written unless the whole render succeeded. An environment with cells has a tree per
// cell: it renders into a folder.
func renderToStdout(cmd *cobra.Command, opts *options, ro *renderOptions) error {
	start := time.Now()
	j, err := prepare(cmd, opts, &ro.inputs)
	if err != nil {
		return err
	}
	if j.hasCells() {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--out %s: environment %s has cells, each with its own tree: render into a folder", stdoutOut, j.r.Env.Name)}
	}
	files, stats, err := j.renderAll()
	if err != nil {
		return err
	}
	if _, err := cmd.OutOrStdout().Write(manifestStream(files)); err != nil {
		return fmt.Errorf("writing the manifests: %w", err)
	}
	if !ro.quiet {
		fmt.Fprintln(cmd.ErrOrStderr(), j.report(stats, start).summary())
	}
	return nil
}

// manifestStream is files as one YAML stream, in path order, each document after the
// comment naming its file; kustomization.yaml files and encrypted Secrets are left out.
func manifestStream(files []render.File) []byte {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b render.File) int { return strings.Compare(a.Path, b.Path) })
	var b bytes.Buffer
	for _, f := range files {
		if path.Base(f.Path) == "kustomization.yaml" {
			continue
		}
		if path.Base(path.Dir(f.Path)) == render.SecretsDir {
			// Encrypted: Flux decrypts it as it applies; kubectl could not.
			fmt.Fprintf(&b, "# Source: %s: a SOPS-encrypted Secret, left out\n", f.Path)
			continue
		}
		for _, doc := range strings.Split(strings.TrimPrefix(string(f.Data), "---\n"), "\n---\n") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			fmt.Fprintf(&b, "---\n# Source: %s\n%s", f.Path, doc)
			if !strings.HasSuffix(doc, "\n") {
				b.WriteByte('\n')
			}
		}
	}
	return b.Bytes()
}
