package airgap

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/aidonow/eva/internal/registry"
)

// Registry says how pin and mirror reach registries.
type Registry = registry.Options

var placeholderRE = regexp.MustCompile(`@sha256:[A-Za-z0-9]+`)

// Pin resolves every entry's tag to its current digest in the source registry and
// rewrites the file in place, keeping comments and order. It fails (writing nothing)
// when any tag cannot be resolved, naming each.
func Pin(ctx context.Context, path string, reg Registry) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	lines := strings.Split(string(data), "\n")
	var failures []string
	pinned := 0
	for i, raw := range lines {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		base := line
		if at := strings.LastIndex(line, "@"); at >= 0 {
			base = line[:at]
		}
		tag, err := name.NewTag(base, reg.NameOpts()...)
		if err != nil {
			failures = append(failures, fmt.Sprintf("line %d: %v", i+1, err))
			continue
		}
		desc, err := remote.Head(tag, reg.RemoteOpts(ctx)...)
		if err != nil {
			failures = append(failures, fmt.Sprintf("line %d: %s: %v", i+1, base, err))
			continue
		}
		lines[i] = placeholderRE.ReplaceAllString(base, "") + "@" + desc.Digest.String()
		pinned++
	}
	if len(failures) > 0 {
		return 0, fmt.Errorf("could not pin %d image(s), nothing written:\n  %s", len(failures), strings.Join(failures, "\n  "))
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		return 0, err
	}
	return pinned, nil
}

// Copy is one planned or done mirror copy.
type Copy struct {
	From, To string
	Err      error
}

// Mirror copies every entry by digest to the registry (and optional path prefix) in
// to, keeping repository paths and tags: host/org/img:tag@d → to/org/img:tag. Indexes
// are copied whole (every platform). Each copy is verified by reading the digest back.
// Copies run in parallel; a failure does not stop the others. With dryRun nothing is
// copied. progress, when set, is called after each copy.
func Mirror(ctx context.Context, entries []Entry, to string, reg Registry, parallel int, dryRun bool, progress func(Copy)) []Copy {
	copies := make([]Copy, len(entries))
	for i, e := range entries {
		path := e.Repository
		if ref, err := name.NewRepository(e.Repository, reg.NameOpts()...); err == nil {
			path = ref.RepositoryStr()
		}
		dst := strings.TrimSuffix(to, "/") + "/" + path
		if e.Tag != "" {
			dst += ":" + e.Tag
		}
		copies[i] = Copy{From: e.Repository + "@" + e.Digest, To: dst}
	}
	if dryRun {
		return copies
	}
	if parallel < 1 {
		parallel = 4
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	sem := make(chan struct{}, parallel)
	for i := range copies {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			copies[i].Err = reg.Copy(ctx, copies[i].From, copies[i].To)
			if progress != nil {
				mu.Lock()
				progress(copies[i])
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return copies
}
