package tenantkey

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// EncryptedRegex is what sops encrypts of a tenant's Secret file: its values alone,
// so that Eva reads the Secret's name, namespace and keys in the clear.
const EncryptedRegex = "^(data|stringData)$"

// Rule is a tenant's sops creation rule: the fields Eva writes. A tenant's rule
// holding others (pgp, kms, key_groups...) is not Eva's to rewrite, and is refused.
type Rule struct {
	PathRegex      string `yaml:"path_regex"`
	EncryptedRegex string `yaml:"encrypted_regex"`
	Age            string `yaml:"age"`
}

// sopsConfig is .sops.yaml as sops reads its creation rules.
type sopsConfig struct {
	CreationRules []map[string]any `yaml:"creation_rules"`
}

// NewRule is the creation rule of a tenant's Secret files, matched by pathRegex,
// encrypted for recipients.
func NewRule(pathRegex string, recipients []string) Rule {
	return Rule{PathRegex: pathRegex, EncryptedRegex: EncryptedRegex, Age: strings.Join(recipients, ",")}
}

// SopsConfigHeader opens a .sops.yaml Eva writes.
const SopsConfigHeader = `# One creation rule per tenant: sops encrypts tenants/<CODE>.<name>.sops.yaml for that
# tenant's own keys only (evactl secrets add-key writes the rule and the environment's
# recipients).
`

// NewSopsConfig is a new .sops.yaml holding rules.
func NewSopsConfig(rules ...Rule) []byte {
	var b strings.Builder
	b.WriteString(SopsConfigHeader + "creation_rules:\n")
	for _, r := range rules {
		b.WriteString(ruleYAML("  ", r))
	}
	return []byte(b.String())
}

// SetRule returns .sops.yaml's data with tenant code's rule (rule.PathRegex): that
// rule is rewritten in its place when only other tenants' rules (rule.PathRegex with
// another code) come before it, else it is removed and written first, since sops takes
// the first rule that matches a file and any other rule before it might. sample is a
// path of one of the tenant's files, relative to .sops.yaml's folder. The rest of the
// file is kept as written; the result is read back as sops reads it.
func SetRule(data []byte, code string, rule Rule, sample string) ([]byte, error) {
	before, err := readRules(data)
	if err != nil {
		return nil, fmt.Errorf("does not read as sops' configuration: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	root := documentMapping(&doc)
	if root == nil && len(strings.TrimSpace(stripComments(data))) > 0 {
		return nil, fmt.Errorf("is not a YAML mapping: add the rule by hand")
	}
	lines := splitLines(data)
	_, rules := lookup(root, "creation_rules")
	var edited []byte
	switch {
	case len(lines) == 0:
		edited = NewSopsConfig(rule)
	case rules == nil || isEmpty(rules):
		block := "creation_rules:\n" + ruleYAML("  ", rule)
		if rules != nil {
			key, _ := lookup(root, "creation_rules")
			edited = join(replaceLine(lines, key.Line, block))
		} else {
			edited = join(append(lines, block))
		}
	case rules.Kind != yaml.SequenceNode || rules.Style&yaml.FlowStyle != 0:
		return nil, fmt.Errorf("line %d: creation_rules is not written as an indented list: add the rule by hand", rules.Line)
	default:
		edited, err = placeRule(lines, rules, code, rule)
		if err != nil {
			return nil, err
		}
	}
	return edited, checkRules(before, edited, rule, sample)
}

// placeRule rewrites the tenant's rule in place, or removes it and writes it first.
func placeRule(lines []string, rules *yaml.Node, code string, rule Rule) ([]byte, error) {
	items := rules.Content
	for _, it := range items {
		if it.Kind != yaml.MappingNode || it.Style&yaml.FlowStyle != 0 || len(it.Content) == 0 {
			return nil, fmt.Errorf("line %d: a creation rule not written as an indented mapping: add the rule by hand", it.Line)
		}
	}
	indent := strings.Repeat(" ", max(items[0].Column-3, 0))
	text := ruleYAML(indent, rule)
	own := slices.IndexFunc(items, func(it *yaml.Node) bool {
		_, re := lookup(it, "path_regex")
		return re != nil && re.Value == rule.PathRegex
	})
	if own >= 0 {
		if extra := otherKeys(items[own]); len(extra) > 0 {
			return nil, fmt.Errorf("line %d: the tenant's rule also sets %s, which Eva does not write: edit it by hand", items[own].Line, strings.Join(extra, ", "))
		}
	}
	earlier := items
	if own >= 0 {
		earlier = items[:own]
	}
	shadowed := slices.ContainsFunc(earlier, func(it *yaml.Node) bool {
		_, re := lookup(it, "path_regex")
		return re == nil || !siblingRule(re.Value, code, rule.PathRegex)
	})
	out := slices.Clone(lines)
	if own >= 0 {
		first, last := items[own].Line, lastLine(items[own])
		if !shadowed {
			return join(slices.Replace(out, first-1, last, text)), nil
		}
		out = slices.Delete(out, first-1, last)
	}
	return join(slices.Insert(out, items[0].Line-1, text)), nil
}

// siblingRule reports whether pathRegex is another tenant's rule: own (tenant code's)
// with another capsule code in its place, which matches none of code's files.
func siblingRule(pathRegex, code, own string) bool {
	i := strings.LastIndex(own, code)
	if i < 0 || len(pathRegex) != len(own) || pathRegex[:i] != own[:i] || pathRegex[i+len(code):] != own[i+len(code):] {
		return false
	}
	other := pathRegex[i : i+len(code)]
	return other != code && strings.Trim(other, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == ""
}

// otherKeys are the keys of a rule Eva does not write.
func otherKeys(rule *yaml.Node) []string {
	var out []string
	for i := 0; i+1 < len(rule.Content); i += 2 {
		if k := rule.Content[i].Value; k != "path_regex" && k != "encrypted_regex" && k != "age" {
			out = append(out, k)
		}
	}
	return out
}

// ruleYAML writes a rule as an item of creation_rules, its dash at indent.
func ruleYAML(indent string, r Rule) string {
	return fmt.Sprintf("%s- path_regex: %s\n%s  encrypted_regex: %s\n%s  age: %s\n",
		indent, quoted(r.PathRegex), indent, quoted(r.EncryptedRegex), indent, r.Age)
}

// quoted writes s as a single-quoted YAML scalar, which takes every character as it
// is but the quote, doubled.
func quoted(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// checkRules refuses an edit after which sops would not pick the rule for sample, or
// the other rules would read differently.
func checkRules(before []map[string]any, edited []byte, rule Rule, sample string) error {
	after, err := readRules(edited)
	if err != nil {
		return fmt.Errorf("the edited file does not read (nothing was written): %w", err)
	}
	var picked map[string]any
	for _, r := range after {
		re, _ := r["path_regex"].(string)
		if m, err := regexp.MatchString(re, sample); re == "" || (err == nil && m) {
			picked = r
			break
		}
	}
	want := map[string]any{"path_regex": rule.PathRegex, "encrypted_regex": rule.EncryptedRegex, "age": rule.Age}
	if !reflect.DeepEqual(picked, want) {
		return fmt.Errorf("sops would encrypt %s by the rule %v, not the tenant's (nothing was written)", sample, picked)
	}
	others := func(rules []map[string]any) []map[string]any {
		return slices.DeleteFunc(slices.Clone(rules), func(r map[string]any) bool { return r["path_regex"] == rule.PathRegex })
	}
	if !slices.EqualFunc(others(before), others(after), func(a, b map[string]any) bool { return reflect.DeepEqual(a, b) }) {
		return fmt.Errorf("the edit would change other creation rules (nothing was written)")
	}
	return nil
}

// readRules reads the creation rules as sops does.
func readRules(data []byte) ([]map[string]any, error) {
	var c sopsConfig
	if err := yaml.Unmarshal(data, &c); err != nil {
		return nil, err
	}
	return c.CreationRules, nil
}

// stripComments drops the comment lines of data.
func stripComments(data []byte) string {
	var b strings.Builder
	for _, l := range splitLines(data) {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l)
		}
	}
	return b.String()
}
