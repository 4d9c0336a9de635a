package cli

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/aidonow/eva/internal/buildinfo"
)

// TestVersion: `evactl version` reports the build in text, JSON and YAML, and refuses
// another format.
func TestVersion(t *testing.T) {
	code, out, errOut := runCLI(t, "version")
	if code != ExitOK || !strings.HasPrefix(out, "evactl ") || !strings.Contains(out, runtime.Version()) {
		t.Errorf("version: exit %d, %q %q", code, out, errOut)
	}
	for _, format := range []string{"json", "yaml"} {
		code, out, errOut := runCLI(t, "version", "-o", format)
		var info buildinfo.Info
		var err error
		if format == "json" {
			err = json.Unmarshal([]byte(out), &info)
		} else {
			err = yaml.Unmarshal([]byte(out), &info)
		}
		if code != ExitOK || err != nil || info.GoVersion != runtime.Version() || info.Version == "" {
			t.Errorf("version -o %s: exit %d, %+v (%v) %q", format, code, info, err, errOut)
		}
	}
	if code, _, errOut := runCLI(t, "version", "-o", "xml"); code != ExitUsage || !strings.Contains(errOut, "want text, json or yaml") {
		t.Errorf("version -o xml: exit %d, %q", code, errOut)
	}
}
