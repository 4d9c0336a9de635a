package cli

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"filippo.io/age"
	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/spf13/cobra"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/project"
	"github.com/aidonow/eva/internal/safetext"
	"github.com/aidonow/eva/internal/tenantfile"
	"github.com/aidonow/eva/internal/tenantkey"
)

// operatorNamespace is where the operator's chart installs it by default: in
// pure-cluster mode it reads each tenant's decryption Secret there.
const operatorNamespace = "eva-system"

type addKeyOptions struct {
	env, overlays, sopsConfig, keys, output string
	tenants                                 []string
}

// newSecretsCommand groups the commands for tenants' SOPS keys.
func newSecretsCommand(opts *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "Tenants' SOPS keys",
	}
	cmd.AddCommand(newSecretsAddKeyCommand(opts))
	return cmd
}

// newSecretsAddKeyCommand is evactl secrets add-key.
func newSecretsAddKeyCommand(_ *options) *cobra.Command {
	o := &addKeyOptions{}
	cmd := &cobra.Command{
		Use:   "add-key CODE",
		Args:  cobra.ExactArgs(1),
		Short: "Give a tenant its own SOPS age key: the key, its recipient in the environment, its .sops.yaml rule",
		Long: `Make tenant CODE's first age key and everything that uses it, so that its Secret
files (tenants/<CODE>.<name>.sops.yaml) can be encrypted with a plain "sops --encrypt":

  keys/<CODE>.agekey                      the private key (mode 0600), for the cluster
  overlays/<env>/tenant/environment.yaml  its public key under secrets.recipients.<CODE>
  .sops.yaml                              the tenant's creation rule, for its keys in
                                          every environment of the fleet

Each file is edited in place: every other line stays as written, comments included,
and each edit is read back (as Eva reads the environment, as sops reads its rules)
before anything is written. The private key is written only where git ignores it.
Printed last: the kubectl commands that make the cluster's decryption Secret from the
key, in Flux's namespace and in the operator's. A tenant that has a key already is
refused (a rotation adds the second key by hand: docs/tenants.md).`,
		Example: `  evactl secrets add-key ACMECO --env prod
  sops --encrypt --in-place tenants/ACMECO.crm-database.sops.yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAddKey(cmd, o, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.env, "env", "dev", "the environment whose recipients get the key")
	f.StringVar(&o.overlays, "overlays", project.DefaultEnvironments, "folder of the environments")
	f.StringSliceVar(&o.tenants, "tenants", []string{DefaultTenantsDir}, "folder of the tenant files (the rule's path; one)")
	f.StringVar(&o.sopsConfig, "sops-config", "", "the fleet's .sops.yaml (default: in the fleet's root, beside eva.yaml, or the working directory)")
	f.StringVar(&o.keys, "keys", "", "folder of the private keys, which git must ignore (default: keys/ in the fleet's root)")
	f.StringVarP(&o.output, "output", "o", "text", "output format: text, json or yaml (what was written, and the cluster's Secret: never the private key)")
	return cmd
}

// addKeyReport is what add-key did.
type addKeyReport struct {
	Code        string `json:"code"`
	Environment string `json:"environment"`
	Recipient   string `json:"recipient"`
	// KeyFile, EnvironmentFile and SopsConfig are the files written.
	KeyFile         string `json:"keyFile"`
	EnvironmentFile string `json:"environmentFile"`
	SopsConfig      string `json:"sopsConfig"`
	// PathRegex is the tenant's creation rule; its Recipients, the tenant's keys in
	// every environment of the fleet.
	PathRegex  string   `json:"pathRegex"`
	Recipients []string `json:"recipients"`
	// Secret is the decryption Secret to make from KeyFile (key identity.agekey), in
	// each of Namespaces.
	Secret     string   `json:"secret"`
	Namespaces []string `json:"namespaces"`
}

var capsuleCodeRE = regexp.MustCompile(evav1.CapsuleCodePattern)

// runAddKey plans every edit, writes them, and says what the cluster needs.
func runAddKey(cmd *cobra.Command, o *addKeyOptions, code string) error {
	if err := checkOutput(o.output); err != nil {
		return err
	}
	if !capsuleCodeRE.MatchString(code) {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%q is not a capsule code (six capital letters)", code)}
	}
	if len(o.tenants) != 1 {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--tenants: the folder the tenant's Secret files go in, one (got %d)", len(o.tenants))}
	}
	plan, err := planAddKey(cmd, o, code)
	if err != nil {
		return err
	}
	if err := plan.write(); err != nil {
		return err
	}
	rep := plan.report
	if o.output != "text" {
		return writeStructured(cmd.OutOrStdout(), o.output, rep)
	}
	for _, f := range []string{"created " + rep.KeyFile, "updated " + rep.EnvironmentFile, "updated " + rep.SopsConfig} {
		fmt.Fprintln(cmd.OutOrStdout(), f)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), `
Next, the cluster's decryption Secret (then remove %[1]s, or keep it offline):
  kubectl -n %[2]s create secret generic %[3]s --from-file=identity.agekey=%[1]s
  kubectl -n %[4]s create secret generic %[3]s --from-file=identity.agekey=%[1]s   # pure-cluster mode
Then encrypt the tenant's Secret files with the rule in %[5]s:
  sops --encrypt --in-place %[6]s
`, safetext.Escape(rep.KeyFile), rep.Namespaces[0], rep.Secret, rep.Namespaces[1], safetext.Escape(rep.SopsConfig),
		safetext.Escape(filepath.Join(o.tenants[0], code+".<name>"+tenantfile.SecretFileSuffix)))
	if len(rep.Recipients) > 1 {
		fmt.Fprintf(cmd.ErrOrStderr(), "and re-encrypt the files it has already for its keys in every environment:\n  sops updatekeys %s\n",
			safetext.Escape(filepath.Join(o.tenants[0], code+".*"+tenantfile.SecretFileSuffix)))
	}
	return nil
}

// addKeyPlan is every file add-key writes, decided and checked before any is.
type addKeyPlan struct {
	report            addKeyReport
	key               []byte
	envFile, sops     string
	envData, sopsData []byte
	// envOld and sopsOld are the files as the edits were made from (nil: none).
	envOld, sopsOld   []byte
	envMode, sopsMode fs.FileMode
}

// planAddKey makes the key and the edits, refusing before anything is written.
func planAddKey(cmd *cobra.Command, o *addKeyOptions, code string) (*addKeyPlan, error) {
	usage := func(err error) error { return &ExitError{Code: ExitUsage, Err: err} }
	root := "."
	if f := fleetOf(cmd); f != nil {
		root = f.Root
	}
	p := &addKeyPlan{sops: cmp.Or(o.sopsConfig, filepath.Join(root, ".sops.yaml"))}
	keys := cmp.Or(o.keys, filepath.Join(root, "keys"))
	keyFile := filepath.Join(keys, code+".agekey")
	if info, err := os.Lstat(keys); err == nil && !info.IsDir() {
		// A link would have the private key written wherever it points.
		return nil, usage(fmt.Errorf("%s is not a folder (a link?): the private key goes in a folder of the fleet's own", keys))
	}
	if err := refuseTracked(keyFile, root, o.keys != ""); err != nil {
		return nil, usage(err)
	}
	p.envFile = filepath.Join(o.overlays, o.env, "tenant", overlay.SettingsFile)
	data, mode, err := readKept(p.envFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, usage(fmt.Errorf("environment %s: %s does not exist: add-key edits an environment the fleet holds (copy a released one into %s first)", o.env, p.envFile, o.overlays))
	} else if err != nil {
		return nil, usage(err)
	}
	identity, err := age.GenerateX25519Identity()
	if err != nil {
		return nil, fmt.Errorf("making the age key: %w", err)
	}
	recipient := identity.Recipient().String()
	p.envOld = data
	if p.envData, err = tenantkey.AddRecipient(data, code, recipient); err != nil {
		return nil, usage(fmt.Errorf("%s: %w", p.envFile, err))
	}
	if _, err := os.Lstat(keyFile); err == nil {
		return nil, usage(fmt.Errorf("%s exists: add-key writes over no key", keyFile))
	}
	p.envMode, p.key = mode, []byte(identity.String()+"\n")
	settings, err := overlay.ParseSettings(p.envData)
	if err != nil {
		return nil, err
	}
	recipients, err := fleetRecipients(o.overlays, o.env, code, settings)
	if err != nil {
		return nil, usage(err)
	}
	sopsDir, _ := filepath.Abs(filepath.Dir(p.sops))
	tenantsAbs, _ := filepath.Abs(o.tenants[0])
	rel, err := filepath.Rel(sopsDir, tenantsAbs)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return nil, usage(fmt.Errorf("--tenants %s is not below %s's folder: sops matches the rule's path from there", o.tenants[0], p.sops))
	}
	rule := tenantkey.NewRule(tenantfile.SecretPathRegex(filepath.ToSlash(rel), code), recipients)
	old, sopsMode, err := readKept(p.sops)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, usage(err)
	}
	p.sopsOld = old
	p.sopsMode = cmp.Or(sopsMode, 0o644)
	sample := filepath.ToSlash(filepath.Join(rel, code+".example"+tenantfile.SecretFileSuffix))
	if p.sopsData, err = tenantkey.SetRule(old, code, rule, sample); err != nil {
		return nil, usage(fmt.Errorf("%s: %w", p.sops, err))
	}
	p.report = addKeyReport{Code: code, Environment: o.env, Recipient: recipient, KeyFile: keyFile,
		EnvironmentFile: p.envFile, SopsConfig: p.sops, PathRegex: rule.PathRegex, Recipients: recipients,
		Secret: settings.Secrets.KeySecret(code), Namespaces: []string{settings.FluxNamespace, operatorNamespace}}
	return p, nil
}

// fleetRecipients are the tenant's recipients in every environment under overlays,
// env's as edited: the Secret files are encrypted for them all.
func fleetRecipients(overlays, env, code string, edited *overlay.Settings) ([]string, error) {
	recipients := edited.Secrets.RecipientsOf(code)
	for _, name := range overlay.Names(overlays) {
		if name == env {
			continue
		}
		e, err := overlay.Load(overlays, name)
		if err != nil {
			return nil, fmt.Errorf("the tenant's rule lists its keys in every environment, and %w", err)
		}
		if e.Settings.Secrets != nil {
			recipients = append(recipients, e.Settings.Secrets.RecipientsOf(code)...)
		}
	}
	return recipients, nil
}

// write writes the key, then the environment, then .sops.yaml; a failure takes back
// what was written.
func (p *addKeyPlan) write() error {
	keyFile := p.report.KeyFile
	if err := os.MkdirAll(filepath.Dir(keyFile), 0o700); err != nil {
		return err
	}
	if err := writeNew(keyFile, p.key, 0o600); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			err = errors.Join(err, os.Remove(keyFile)) // no half-written key stops a retry
		}
		return err
	}
	// A file changed since it was read is not written over with an edit of its old text.
	unchanged := func(path string, was []byte) error {
		now, _, err := readKept(path)
		if errors.Is(err, fs.ErrNotExist) && was == nil {
			return nil
		}
		if err == nil && !bytes.Equal(now, was) {
			err = fmt.Errorf("%s changed while add-key ran; nothing was written, run it again", path)
		}
		return err
	}
	err := unchanged(p.envFile, p.envOld)
	if err == nil {
		err = unchanged(p.sops, p.sopsOld)
	}
	if err == nil {
		err = replaceFile(p.envFile, p.envData, p.envMode)
	}
	if err != nil {
		return errors.Join(err, os.Remove(keyFile))
	}
	if err := replaceFile(p.sops, p.sopsData, p.sopsMode); err != nil {
		return errors.Join(err, os.Remove(keyFile), replaceFile(p.envFile, p.envOld, p.envMode))
	}
	return nil
}

// refuseTracked refuses a private key path git would not ignore, in the fleet
// repository or, before it is one, by the fleet's .gitignore: the key would be one "git
// add -A" from being published. Unless the folder was named (explicit), the key must
// resolve into the fleet: a linked folder would have it written elsewhere unseen.
func refuseTracked(path, fleetRoot string, explicit bool) error {
	abs, existing, err := resolved(path)
	if err != nil {
		return err
	}
	root, _, err := resolved(filepath.Join(fleetRoot, "."))
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(root, abs)
	inFleet := err == nil && filepath.IsLocal(rel)
	if !inFleet && !explicit {
		return fmt.Errorf("%s resolves to %s, outside the fleet %s (a linked folder?): name the folder with --keys to keep the key there", path, abs, root)
	}
	_, repoRoot, _, wt, err := fleetCommit(existing)
	if err != nil {
		return err
	}
	var files billy.Filesystem
	switch {
	case repoRoot != "":
		files = wt.Filesystem
		if rel, err = filepath.Rel(repoRoot, abs); err != nil || !filepath.IsLocal(rel) {
			return nil // outside the repository
		}
	case inFleet:
		files = osfs.New(root) // not a repository yet: its .gitignore decides
	default:
		return nil
	}
	patterns, err := gitignore.ReadPatterns(files, nil)
	if err != nil {
		return fmt.Errorf("reading the fleet's ignore rules: %w", err)
	}
	if !gitignore.NewMatcher(patterns).Match(strings.Split(filepath.ToSlash(rel), "/"), false) {
		return fmt.Errorf("%s is not ignored by git in %s: add /%s/ to .gitignore, or name another folder with --keys", path, files.Root(), filepath.ToSlash(filepath.Dir(rel)))
	}
	return nil
}

// resolved is path made absolute with the symbolic links of its existing folders
// resolved, and the nearest of those folders.
func resolved(path string) (abs, existing string, err error) {
	if abs, err = filepath.Abs(path); err != nil {
		return "", "", err
	}
	rest := ""
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest, filepath.Base(abs)), r, nil
		}
		if filepath.Dir(dir) == dir {
			return abs, dir, nil
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

// readKept reads a file add-key edits: a regular file, never one behind a link.
func readKept(path string) ([]byte, fs.FileMode, error) {
	info, err := os.Lstat(path)
	if err != nil {
		return nil, 0, err
	}
	if !info.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is not a regular file: add-key edits files in place only", path)
	}
	data, err := os.ReadFile(path)
	return data, info.Mode().Perm(), err
}

// replaceFile writes data to path at once (a reader sees the old file or the new).
func replaceFile(path string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".eva-edit-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	err = errors.Join(err, tmp.Chmod(mode), tmp.Close())
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
