package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

// TestFlagsMeanOneThingEverywhere: a flag name means one thing on every command (same
// type, same shorthand), a shorthand stands for one flag name, and each concept has one
// name: the commands that publish take -q as render does, every --output has -o, and
// names kubectl, flux and helm users would type for a concept Eva names otherwise do not
// exist. The tree is walked, so a new command is held to it too.
func TestFlagsMeanOneThingEverywhere(t *testing.T) {
	type seen struct{ typ, short, where string }
	byName, byShort := map[string]seen{}, map[string]string{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			s := seen{f.Value.Type(), f.Shorthand, c.CommandPath()}
			if was, ok := byName[f.Name]; ok && (was.typ != s.typ || was.short != s.short) {
				t.Errorf("--%s is %s -%s on %q but %s -%s on %q", f.Name, was.typ, was.short, was.where, s.typ, s.short, s.where)
			} else if !ok {
				byName[f.Name] = s
			}
			if f.Shorthand != "" {
				if name, ok := byShort[f.Shorthand]; ok && name != f.Name {
					t.Errorf("-%s is --%s and --%s (%q)", f.Shorthand, name, f.Name, c.CommandPath())
				}
				byShort[f.Shorthand] = f.Name
			}
			for _, other := range []string{"oci-insecure", "plain-http", "insecure-registry", "kube-config", "kube-context",
				"output-format", "format", "silent", "ns", "dryrun", "force-delete"} {
				if f.Name == other {
					t.Errorf("%q has --%s: Eva names that concept once (see the other commands)", c.CommandPath(), f.Name)
				}
			}
		})
		if out := c.Flags().Lookup("output"); out != nil && out.Shorthand != "o" {
			t.Errorf("%q: --output without -o", c.CommandPath())
		}
		if c.Flags().Lookup("allow-mass-delete") != nil && c.Name() != "diff" && c.Flags().Lookup("quiet") == nil {
			t.Errorf("%q publishes or renders but has no -q/--quiet", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewRootCommand())
	if len(byName) < 30 {
		t.Fatalf("found %d flag names: the walk missed commands", len(byName))
	}
}

// TestEveryReportingCommandTakesOutput: every command that says what it did takes -o
// json|yaml for a program to read it, as kubectl and flux commands do. The tree is
// walked; the commands left out say why.
func TestEveryReportingCommandTakesOutput(t *testing.T) {
	exempt := map[string]string{
		"evactl init":            "it writes a new fleet's files and names each; nothing to report beyond them",
		"evactl operator values": "its output is the values file itself",
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			if sub.HasSubCommands() {
				walk(sub)
				continue
			}
			_, isExempt := exempt[sub.CommandPath()]
			if f := sub.Flags().Lookup("output"); (f == nil) != isExempt {
				t.Errorf("%s: --output %v, exempt %v", sub.CommandPath(), f != nil, isExempt)
			} else if f != nil && !strings.Contains(f.Usage, "json") {
				t.Errorf("%s: -o does not offer json: %s", sub.CommandPath(), f.Usage)
			}
		}
	}
	walk(NewRootCommand())
}
