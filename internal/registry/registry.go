// Package registry holds how Eva's commands reach an OCI registry: plain HTTP or TLS,
// and whose credentials. Image pinning and mirroring and chart publishing share it.
package registry

import (
	"context"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Options say how to reach a registry.
type Options struct {
	// Insecure allows plain-HTTP registries.
	Insecure bool
	// Keychain resolves credentials (the Docker config file by default).
	Keychain authn.Keychain
}

// NameOpts are the options references are parsed with.
func (o Options) NameOpts() []name.Option {
	opts := []name.Option{name.StrictValidation}
	if o.Insecure {
		opts = append(opts, name.Insecure)
	}
	return opts
}

// RemoteOpts are the options of every registry request made under ctx.
func (o Options) RemoteOpts(ctx context.Context) []remote.Option {
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	return []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)}
}
