package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestUndeclaredArgumentsAreRefused: every command that declares no arguments refuses
// one (it used to run as if the argument selected something: `evactl render
// tenants/DEVUSR.yaml` rendered every tenant), and a command grouping others refuses an
// unknown one with the one it may have meant. The tree is walked, so a new command is
// covered too.
func TestUndeclaredArgumentsAreRefused(t *testing.T) {
	var leaves [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			p := append(append([]string{}, path...), sub.Name())
			if sub.HasSubCommands() {
				walk(sub, p)
			} else if !strings.Contains(sub.Use, " ") {
				leaves = append(leaves, p)
			}
		}
	}
	walk(NewRootCommand(), nil)
	if len(leaves) < 8 {
		t.Fatalf("found %d commands that take no arguments: %v", len(leaves), leaves)
	}
	for _, path := range leaves {
		var stdout, stderr bytes.Buffer
		code := Execute(append(path, "tenants/DEVUSR.yaml"), &stdout, &stderr)
		if code != ExitUsage || !strings.Contains(stderr.String(), "takes no arguments") {
			t.Errorf("evactl %s tenants/DEVUSR.yaml: exit %d, %q", strings.Join(path, " "), code, stderr.String())
		}
	}
	for args, want := range map[string]string{
		"charts pusj":      `unknown command "pusj" for "evactl charts" (did you mean "push"?)`,
		"rollout promot x": `unknown command "promot" for "evactl rollout" (did you mean "promote"?)`,
		"rendr":            `unknown command "rendr" for "evactl" (did you mean "render"?)`,
	} {
		var stdout, stderr bytes.Buffer
		if code := Execute(strings.Fields(args), &stdout, &stderr); code != ExitUsage || !strings.Contains(stderr.String(), want) {
			t.Errorf("evactl %s: exit %d, %q; want %q", args, code, stderr.String(), want)
		}
	}
}
