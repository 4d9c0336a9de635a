package cli

import (
	"context"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/safetext"
)

// gitTarget are the flags naming a git branch to publish to or diff against.
type gitTarget struct {
	repo, branch, path, cacheDir string
	username                     string
	passwordEnv, passwordFile    string
	tokenEnv, tokenFile          string
	sshKey, sshKnownHosts        string
	sshPassphraseEnv             string
}

func (g *gitTarget) bind(f *pflag.FlagSet) {
	f.StringVar(&g.repo, "repo", "", "repository URL (https://, ssh:// or a local path)")
	f.StringVar(&g.branch, "branch", "main", "branch")
	f.StringVar(&g.path, "path", "", "folder of the repository holding the tree (default: the root)")
	f.StringVar(&g.cacheDir, "cache-dir", "", "local cache of the repository (default: under the user cache folder)")
	f.StringVar(&g.username, "username", "", "HTTPS user name (default git, or x-access-token with a token)")
	f.StringVar(&g.passwordEnv, "password-env", "", "environment variable holding the HTTPS password")
	f.StringVar(&g.passwordFile, "password-file", "", "file holding the HTTPS password")
	f.StringVar(&g.tokenEnv, "token-env", "", "environment variable holding an HTTPS access token (default EVA_GIT_TOKEN when set)")
	f.StringVar(&g.tokenFile, "token-file", "", "file holding an HTTPS access token")
	f.StringVar(&g.sshKey, "ssh-key", "", "SSH private key file")
	f.StringVar(&g.sshPassphraseEnv, "ssh-passphrase-env", "", "environment variable holding the SSH key's passphrase")
	f.StringVar(&g.sshKnownHosts, "ssh-known-hosts", "", "known_hosts file (default ~/.ssh/known_hosts)")
}

// secret reads a credential from an environment variable or a file, never from the
// command line.
func secret(envVar, file string) (string, error) {
	switch {
	case envVar != "":
		v, ok := os.LookupEnv(envVar)
		if !ok || v == "" {
			return "", fmt.Errorf("environment variable %s is not set", envVar)
		}
		return v, nil
	case file != "":
		data, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("reading credential file: %w", err)
		}
		return strings.TrimSpace(string(data)), nil
	}
	return "", nil
}

func (g *gitTarget) auth() (transport.AuthMethod, error) {
	if g.sshKey != "" {
		pass, err := secret(g.sshPassphraseEnv, "")
		if err != nil {
			return nil, err
		}
		keys, err := gitssh.NewPublicKeysFromFile("git", g.sshKey, pass)
		if err != nil {
			return nil, fmt.Errorf("SSH key %s: %w", g.sshKey, err)
		}
		var files []string
		if g.sshKnownHosts != "" {
			files = append(files, g.sshKnownHosts)
		}
		cb, err := gitssh.NewKnownHostsCallback(files...)
		if err != nil {
			return nil, fmt.Errorf("known hosts: %w", err)
		}
		keys.HostKeyCallback = cb
		return keys, nil
	}
	tokenEnv := g.tokenEnv
	if tokenEnv == "" && g.tokenFile == "" && g.passwordEnv == "" && g.passwordFile == "" && os.Getenv("EVA_GIT_TOKEN") != "" {
		tokenEnv = "EVA_GIT_TOKEN"
	}
	if tokenEnv != "" || g.tokenFile != "" {
		token, err := secret(tokenEnv, g.tokenFile)
		if err != nil {
			return nil, err
		}
		return &githttp.BasicAuth{Username: orDefault(g.username, "x-access-token"), Password: token}, nil
	}
	if g.passwordEnv != "" || g.passwordFile != "" {
		password, err := secret(g.passwordEnv, g.passwordFile)
		if err != nil {
			return nil, err
		}
		return &githttp.BasicAuth{Username: orDefault(g.username, "git"), Password: password}, nil
	}
	return nil, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func (g *gitTarget) remote(author publish.Author, subject string) (*publish.GitRemote, error) {
	if g.repo == "" {
		return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("--repo is required (or set publish: repo: in eva.yaml)")}
	}
	if safetext.HasCredentials(g.repo) {
		// Arguments show in process lists, shell history and CI logs, and the URL would be
		// kept in the cache's git config.
		return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("--repo %s: credentials (or a query) in the URL are refused: pass a token with EVA_GIT_TOKEN, --token-env or --token-file, or a password with --password-env or --password-file (and --username)", safetext.RedactURL(g.repo))}
	}
	path, err := publish.RepoPath(g.path)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("--path: %w", err)}
	}
	auth, err := g.auth()
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: err}
	}
	if g.cacheDir == "" {
		// The clone's default home is the user's cache folder; without one evactl says so
		// rather than keep the clone in the shared temporary folder, where another user
		// could have planted a repository of the right name first.
		if _, err := os.UserCacheDir(); err != nil {
			return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("no folder for the repository's clone: %w (set HOME or XDG_CACHE_HOME, or pass --cache-dir)", err)}
		}
	}
	return &publish.GitRemote{URL: g.repo, Branch: g.branch, Path: path, Auth: auth,
		Author: author, CacheDir: g.cacheDir, Subject: subject}, nil
}

// ociTarget are the flags naming an OCI artifact.
type ociTarget struct {
	ref, source, revision string
	insecure              bool
}

func (o *ociTarget) bind(f *pflag.FlagSet) {
	f.StringVar(&o.ref, "ref", "", "artifact reference, oci://HOST/REPO:TAG")
	f.BoolVar(&o.insecure, "insecure", false, "allow a plain-HTTP registry")
	f.StringVar(&o.source, "source", "", "source annotation (default: the origin URL of the current git repository)")
	f.StringVar(&o.revision, "revision", "", "revision annotation (default: <branch>@sha1:<commit> of the current git repository)")
}

func (o *ociTarget) sink() (*publish.OCI, error) {
	if o.ref == "" {
		return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("--ref is required (or set publish: ref: in eva.yaml)")}
	}
	source, revision := o.source, o.revision
	if source == "" || revision == "" {
		s, r := gitProvenance(".")
		source, revision = orDefault(source, s), orDefault(revision, r)
	}
	// The annotation is public to anyone who can pull the artifact.
	if source != "" {
		source = safetext.RedactURL(source)
	}
	kc := authn.NewMultiKeychain(envKeychain{}, authn.DefaultKeychain)
	return &publish.OCI{Ref: o.ref, Insecure: o.insecure, Keychain: kc, Source: source, Revision: revision}, nil
}

// envKeychain takes registry credentials from EVA_REGISTRY_USERNAME and
// EVA_REGISTRY_PASSWORD when both are set.
type envKeychain struct{}

func (envKeychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	user, pass := os.Getenv("EVA_REGISTRY_USERNAME"), os.Getenv("EVA_REGISTRY_PASSWORD")
	if user == "" || pass == "" {
		return authn.Anonymous, nil
	}
	return &authn.Basic{Username: user, Password: pass}, nil
}

// gitProvenance describes the git repository holding dir: its origin URL without
// credentials (a CI checkout's origin often holds a token) and "<branch>@sha1:<commit>",
// as Flux writes revisions (fleetCommit).
func gitProvenance(dir string) (source, revision string) {
	s, _, _, _, _ := fleetCommit(dir)
	return s.source, s.revision
}

func newPublishCommand(opts *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "publish",
		Short: "Render tenants and publish them to a git branch or an OCI artifact",
	}
	cmd.AddCommand(newPublishGitCommand(opts), newPublishOCICommand(opts))
	return cmd
}

type publishFlags struct {
	inputs          renderInputs
	allowMassDelete bool
	allowDirty      bool
	quiet           bool
	output          string
	timeout         time.Duration
	moves           moveFlags
}

func (p *publishFlags) bind(f *pflag.FlagSet) {
	p.inputs.bind(f)
	p.moves.bind(f)
	f.BoolVar(&p.allowMassDelete, "allow-mass-delete", false, "allow removing most (or all) published tenants")
	f.BoolVar(&p.allowDirty, "allow-dirty", false, "publish although the files read differ from the fleet repository's commit (the commit's trailer says how many)")
	f.DurationVar(&p.timeout, "timeout", 5*time.Minute, "give up after this long")
	f.BoolVarP(&p.quiet, "quiet", "q", false, "print nothing but the published revision and errors")
	f.StringVarP(&p.output, "output", "o", "text", outputFlagUsage)
}

func newPublishGitCommand(opts *options) *cobra.Command {
	var pf publishFlags
	var target gitTarget
	var author authorFlags
	cmd := &cobra.Command{
		Use:   "git",
		Short: "Publish to a branch of a git repository (one commit, fast-forward push)",
		Long: `Render the tenants and publish the tree to a branch: fetch into a local cache, merge
only the tenants that changed into the remote head, one commit listing them, and a
fast-forward push. A push rejected because the branch moved is retried on the new head.
Credentials come from environment variables or files, never from the command line.`,
		Example: `  EVA_GIT_TOKEN=... evactl publish git --repo https://git.example.com/platform/fleet.git --branch main --path clusters/prod`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			g, err := target.remote(author.author(), "")
			if err != nil {
				return err
			}
			var env string
			var trailers []string
			cells := cellTarget{
				read: gitCells(&target),
				sink: func(c overlay.Cell) (publish.Sink, error) {
					r, err := target.cellRemote(c, author.author())
					if err == nil {
						r.Subject = fmt.Sprintf("eva: publish tenants for %s, cell %s", env, c.Name)
						r.Trailers = trailers
					}
					return r, err
				},
				treePath: func(c overlay.Cell) string { return path.Join(g.Path, c.Path) },
			}
			return runPublish(cmd, opts, &pf, g, g.Path, cells, func(e string) { env, g.Subject = e, "eva: publish tenants for "+e },
				func(f fleetState) { trailers = f.trailers(); g.Trailers = trailers })
		},
	}
	pf.bind(cmd.Flags())
	target.bind(cmd.Flags())
	author.bind(cmd.Flags())
	return cmd
}

func newPublishOCICommand(opts *options) *cobra.Command {
	var pf publishFlags
	var target ociTarget
	cmd := &cobra.Command{
		Use:   "oci",
		Short: "Publish as a Flux OCI artifact (reproducible: an unchanged render pushes nothing)",
		Example: `  evactl publish oci --ref oci://registry.example.com/eva/tenants:prod
  evactl publish oci --ref oci://localhost:5000/eva/tenants:dev --insecure`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := target.sink()
			if err != nil {
				return err
			}
			cells := cellTarget{
				read: ociCells(&target),
				sink: func(c overlay.Cell) (publish.Sink, error) {
					s, err := target.forCell(c).sink()
					if err != nil {
						return nil, err
					}
					return s, nil
				},
				treePath: ownRoot,
			}
			return runPublish(cmd, opts, &pf, o, "", cells, nil, nil)
		},
	}
	pf.bind(cmd.Flags())
	target.bind(cmd.Flags())
	return cmd
}

// checkSourceKind refuses to publish with command (git or oci) for an environment
// whose applier reads another kind of destination (overlay.Settings.CheckPublish).
func checkSourceKind(env *overlay.Environment, command string) error {
	if err := env.Settings.CheckPublish(command); err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("environment %s: %w", env.Name, err)}
	}
	return nil
}

// cellTarget is the destination of each cell's tree, for an environment with cells:
// how its published tree is read, where it is published, and under which folder.
type cellTarget struct {
	read     treeReader
	sink     cellSink
	treePath treePaths
}

// runPublish renders and publishes; treePath is the folder of the repository the tree
// goes under, which the tenants' Flux Kustomizations must name. In an environment with
// cells, each cell's tree goes to its own destination instead (cells).
func runPublish(cmd *cobra.Command, opts *options, pf *publishFlags, sink publish.Sink, treePath string, cells cellTarget, onEnv func(string), onFleet func(fleetState)) error {
	start := time.Now()
	if err := checkOutput(pf.output); err != nil {
		return err
	}
	pf.inputs.published = cells.read
	j, err := prepare(cmd, opts, &pf.inputs)
	if err != nil {
		return err
	}
	if err := checkSourceKind(j.r.Env, cmd.Name()); err != nil {
		return err
	}
	fleet, err := readFleetState(pf.inputs.files(fleetOf(cmd)))
	if err != nil {
		return err
	}
	if err := fleet.checkClean(pf.allowDirty); err != nil {
		return err
	}
	if onFleet != nil {
		onFleet(fleet)
	}
	j.r.TreePath = treePath
	if onEnv != nil {
		onEnv(j.r.Env.Name)
	}
	if j.hasCells() {
		ctx, cancel := context.WithTimeout(cmd.Context(), pf.timeout)
		defer cancel()
		err := j.advanceMoves(ctx, pf.moves, func(c overlay.Cell) (publish.Revisions, error) {
			sink, err := cells.sink(c)
			if err != nil {
				return nil, err
			}
			revs, ok := sink.(publish.Revisions)
			if !ok {
				return nil, fmt.Errorf("cell %s: its destination cannot say what it holds", c.Name)
			}
			return revs, nil
		}, cells.treePath, time.Now())
		if err != nil {
			return err
		}
		j.reportMoves(cmd.ErrOrStderr())
		return publishCells(cmd, j, pf, cells.sink, cells.treePath, start)
	}
	if len(pf.moves.kubeconfigs) > 0 {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--cell-kubeconfig: environment %s has no cells", j.r.Env.Name)}
	}
	files, stats, err := j.renderAll()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), pf.timeout)
	defer cancel()
	res, err := sink.Publish(ctx, publish.FullUpdate(files), publish.Safety{AllowMassDelete: pf.allowMassDelete})
	if err != nil {
		return err
	}
	rep := j.report(stats, start)
	rep.Tree = outcomeOf(res)
	if err := rep.finish(cmd, pf.output, pf.quiet, rep.summary()+"; "+rep.Tree.publishSummary()); err != nil || pf.output != "text" {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), res.Revision)
	return nil
}
