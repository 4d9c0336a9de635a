// Package registry holds how Eva's commands reach an OCI registry: plain HTTP or TLS,
// and whose credentials. Image pinning and mirroring and chart publishing share it.
package registry

import (
	"context"
	"fmt"

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

// Copy copies what from names by digest (an image, a multi-platform index, or any other
// OCI manifest such as a Helm chart's) with its blobs to the reference to, and verifies
// the digest the destination reports.
func (o Options) Copy(ctx context.Context, from, to string) error {
	src, err := name.NewDigest(from, o.NameOpts()...)
	if err != nil {
		return err
	}
	dst, err := name.ParseReference(to, o.NameOpts()...)
	if err != nil {
		return err
	}
	opts := o.RemoteOpts(ctx)
	desc, err := remote.Get(src, opts...)
	if err != nil {
		return fmt.Errorf("reading %s: %w", from, err)
	}
	if desc.MediaType.IsIndex() {
		idx, idxErr := desc.ImageIndex()
		if idxErr != nil {
			return idxErr
		}
		err = remote.WriteIndex(dst, idx, opts...)
	} else {
		img, imgErr := desc.Image()
		if imgErr != nil {
			return imgErr
		}
		err = remote.Write(dst, img, opts...)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", to, err)
	}
	got, err := remote.Head(dst, opts...)
	if err != nil {
		return fmt.Errorf("verifying %s: %w", to, err)
	}
	if got.Digest != desc.Digest {
		return fmt.Errorf("verifying %s: digest %s, want %s", to, got.Digest, desc.Digest)
	}
	return nil
}
