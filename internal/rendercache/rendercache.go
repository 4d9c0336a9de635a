// Package rendercache remembers, inside a local git repository Eva renders into, what
// each tenant of the last committed render was rendered from, so that the next render
// of the same repository renders and commits only the tenants whose inputs changed.
//
// Correctness comes first: the cache describes one commit and one key covering every
// input shared by all tenants (the catalog, the environment, the charts checked, the
// renderer's own build). A different head, key or format makes the whole cache stale,
// and a stale, missing or unreadable cache costs one full render, never a wrong one.
package rendercache

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"time"

	"github.com/aidonow/eva/internal/tenantfile"
)

// File is where the cache lives, relative to the repository's .git folder: never
// committed, never seen by Flux, and removed with the repository.
const File = "eva/render-cache"

// formatVersion changes whenever what the cache means changes.
const formatVersion = 1

// Cache is what one committed render was made from.
type Cache struct {
	// Commit is the commit the render produced (or found unchanged).
	Commit string
	// Key is the digest of every input the tenants share.
	Key string
	// Tenants maps each rendered tenant's capsule code to the digest of its inputs.
	Tenants map[string]string
	// Files is what the load of the tenant files found valid, for the next load to
	// skip the files that have not changed on disk (tenantfile.LoadOptions).
	Files map[string]tenantfile.Known
	// Recorded is when that load started.
	Recorded time.Time
}

// Load reads the cache of the repository whose .git folder is gitDir. A missing,
// unreadable or other-format cache is no cache (nil): the render that follows is full.
func Load(gitDir string) *Cache {
	data, err := os.ReadFile(filepath.Join(gitDir, File))
	if err != nil {
		return nil
	}
	c, err := decode(data)
	if err != nil {
		return nil
	}
	return c
}

// Fresh reports whether the cache describes this head, rendered with this key.
func (c *Cache) Fresh(commit, key string) bool {
	return c != nil && commit != "" && c.Commit == commit && c.Key == key
}

// Save writes the cache for the repository whose .git folder is gitDir, atomically.
func (c *Cache) Save(gitDir string) error {
	path := filepath.Join(gitDir, File)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("render cache: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".render-cache-*")
	if err != nil {
		return fmt.Errorf("render cache: %w", err)
	}
	buf := bufio.NewWriterSize(tmp, 64<<10)
	c.encode(buf)
	if err := errors.Join(buf.Flush(), tmp.Close()); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("render cache: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("render cache: %w", err)
	}
	return nil
}

// Digest hashes a sequence of parts; each part is length-prefixed, so no two different
// sequences hash alike.
type Digest struct{ h hash.Hash }

// NewDigest starts a digest.
func NewDigest() *Digest { return &Digest{h: sha256.New()} }

// Add appends a part.
func (d *Digest) Add(part []byte) *Digest {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(part)))
	d.h.Write(n[:])
	d.h.Write(part)
	return d
}

// Reset starts the digest again, keeping its hash: one Digest serves many keys without
// allocating.
func (d *Digest) Reset() { d.h.Reset() }

// AddString appends a part given as a string.
func (d *Digest) AddString(part string) *Digest { return d.Add([]byte(part)) }

// Sum returns the digest in hex.
func (d *Digest) Sum() string { return hex.EncodeToString(d.h.Sum(nil)) }
