package release

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/aidonow/eva/internal/chartrepo"
)

// operatorChart packages the operator's chart as released: its version and appVersion
// the release's, and its image the pushed one by digest. The chart folder is copied and
// the two files edited in the copy; the repository is not touched.
func (o *Options) operatorChart(img Image) (*chartrepo.Archive, error) {
	stage, err := os.MkdirTemp("", "eva-release-chart-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	dir := filepath.Join(stage, filepath.Base(o.OperatorChartDir))
	if err := os.CopyFS(dir, os.DirFS(o.path(o.OperatorChartDir))); err != nil {
		return nil, fmt.Errorf("copying the operator chart: %w", err)
	}
	repository, _, _ := strings.Cut(img.Ref, "@")
	edits := map[string]map[string]string{
		"Chart.yaml":  {"version": o.Version, "appVersion": o.Version},
		"values.yaml": {"image.repository": repository, "image.tag": o.Version, "image.digest": img.Digest},
	}
	for file, set := range edits {
		if err := setScalars(filepath.Join(dir, file), set); err != nil {
			return nil, fmt.Errorf("operator chart %s: %w", file, err)
		}
	}
	return chartrepo.Package(dir)
}

// setScalars sets the scalars at dotted paths of a YAML file, keeping its comments
// and every other value; each path must exist.
func setScalars(path string, set map[string]string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return err
	}
	if len(doc.Content) != 1 {
		return fmt.Errorf("not one YAML document")
	}
	for key, value := range set {
		n := doc.Content[0]
		for _, part := range strings.Split(key, ".") {
			n = lookup(n, part)
			if n == nil {
				return fmt.Errorf("no %s", key)
			}
		}
		if n.Kind != yaml.ScalarNode {
			return fmt.Errorf("%s is not a scalar", key)
		}
		n.Value, n.Tag, n.Style = value, "!!str", yaml.DoubleQuotedStyle
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// lookup is the value of key in the mapping n, nil when absent.
func lookup(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
