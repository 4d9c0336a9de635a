// Package airgap reads and checks images.txt, the digest-pinned list of every image an
// air-gapped install needs.
package airgap

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Placeholder marks a digest not resolved yet (`evactl images pin` replaces it).
const Placeholder = "PLACEHOLDER"

// Entry is one image line.
type Entry struct {
	Line int
	// Ref is the line as written, Repository and Tag its parts ("" tag when absent).
	Ref, Repository, Tag, Digest string
}

// Problem is one thing wrong with images.txt or with its coverage.
type Problem struct {
	Line    int    `json:"line,omitempty"`
	Chart   string `json:"chart,omitempty"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	switch {
	case p.Line > 0:
		return fmt.Sprintf("images.txt:%d: %s", p.Line, p.Message)
	case p.Chart != "":
		return fmt.Sprintf("chart %s: %s", p.Chart, p.Message)
	}
	return p.Message
}

// Parse reads images.txt: one `<repository>[:<tag>]@sha256:<digest>` a line, `#`
// comments and blank lines allowed. It returns the entries and every problem:
// placeholder digests, malformed or tag-only references, duplicates.
func Parse(r io.Reader) ([]Entry, []Problem) {
	var entries []Entry
	var problems []Problem
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "#"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" {
			continue
		}
		at := strings.LastIndex(line, "@")
		if at < 0 {
			problems = append(problems, Problem{Line: n, Message: fmt.Sprintf("%q is not pinned by digest (want <image>@sha256:<digest>)", line)})
			continue
		}
		base, digest := line[:at], line[at+1:]
		if digest == "sha256:"+Placeholder || strings.Contains(digest, Placeholder) {
			problems = append(problems, Problem{Line: n, Message: fmt.Sprintf("%s has a PLACEHOLDER digest: run `evactl images pin`", base)})
			// Still listed: coverage counts it, pinning will resolve it.
			if tag, err := name.NewTag(base, name.StrictValidation); err == nil {
				entries = append(entries, Entry{Line: n, Ref: line, Repository: tag.Context().Name(), Tag: tag.TagStr(), Digest: Placeholder})
			}
			continue
		}
		ref, err := name.NewDigest(line, name.StrictValidation)
		if err != nil {
			problems = append(problems, Problem{Line: n, Message: fmt.Sprintf("%q is not a valid digest reference: %v", line, err)})
			continue
		}
		e := Entry{Line: n, Ref: line, Repository: ref.Context().Name(), Digest: ref.DigestStr()}
		if tagged, err := name.NewTag(base, name.StrictValidation); err == nil && strings.Contains(base[strings.LastIndex(base, "/")+1:], ":") {
			e.Tag = tagged.TagStr()
		}
		key := e.Repository + ":" + e.Tag
		if first, dup := seen[key]; dup {
			problems = append(problems, Problem{Line: n, Message: fmt.Sprintf("%s is already listed on line %d", base, first)})
			continue
		}
		seen[key] = n
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		problems = append(problems, Problem{Message: "reading images.txt: " + err.Error()})
	}
	return entries, problems
}

// Covers reports the images (as charts or settings name them, repository[:tag]) that
// no entry lists. source names where each image came from, for the message.
func Covers(entries []Entry, images map[string]string) []Problem {
	listed := map[string]bool{}
	for _, e := range entries {
		listed[e.Repository+":"+e.Tag] = true
	}
	var problems []Problem
	for _, img := range sortedKeys(images) {
		ref, err := name.ParseReference(img)
		if err != nil {
			problems = append(problems, Problem{Chart: images[img], Message: fmt.Sprintf("image %q is not a valid reference: %v", img, err)})
			continue
		}
		tag := ""
		if t, ok := ref.(name.Tag); ok {
			tag = t.TagStr()
		}
		if !listed[ref.Context().Name()+":"+tag] {
			problems = append(problems, Problem{Chart: images[img], Message: fmt.Sprintf("image %s is not listed in images.txt", img)})
		}
	}
	return problems
}

// ImagesInManifests finds the container images in rendered YAML (every `image:` under a
// container list).
func ImagesInManifests(manifests []byte) []string {
	var out []string
	for _, line := range bytes.Split(manifests, []byte("\n")) {
		trimmed := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(line)), "- "))
		if v, ok := strings.CutPrefix(trimmed, "image:"); ok {
			v = strings.Trim(strings.TrimSpace(v), `"'`)
			if v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
