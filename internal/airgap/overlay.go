package airgap

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

var (
	imageNameRE  = regexp.MustCompile(`^(\s*)-\s*name:\s*(\S+)\s*$`)
	mirrorRepoRE = regexp.MustCompile(`^(\s*)repository:\s*(\S+)\s*$`)
	digestRE     = regexp.MustCompile(`^(\s*)digest:\s*\S+\s*$`)
	// topLevelKeyRE starts a top-level field of a YAML file (images:, resources:, …).
	topLevelKeyRE = regexp.MustCompile(`^[A-Za-z][\w.-]*:`)
	// seedImageRE is the seeder image of an environment.yaml, pinned by digest.
	seedImageRE = regexp.MustCompile(`^(\s*seedImage:\s*)([^@\s]+)@sha256:\S+\s*$`)
)

// SyncOverlay sets the digests in a kustomization to those images.txt pins, so the
// air-gap overlays deploy exactly the pinned images: in an `images:` list, the entry
// whose name is an images.txt repository; in a values patch, the `digest:` following a
// `repository:` on the mirror whose path matches an images.txt repository. The file is
// edited line by line: comments and layout stay. It returns how many digests it set,
// and fails on an image images.txt does not know.
func SyncOverlay(path string, entries []Entry) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	digests := map[string]string{}
	byPath := map[string]string{} // repository path without the registry → digest
	for _, e := range entries {
		// A digest not resolved yet leaves the overlay's own placeholder as it is.
		d := e.Digest
		if d == Placeholder {
			d = ""
		}
		digests[e.Repository] = d
		if i := strings.Index(e.Repository, "/"); i >= 0 {
			byPath[e.Repository[i+1:]] = d
		}
	}
	lines := strings.Split(string(data), "\n")
	current, updated := "", 0
	inImages := false // inside the kustomization's top-level images: list
	var unknown []string
	for i, line := range lines {
		if topLevelKeyRE.MatchString(line) {
			inImages = strings.HasPrefix(line, "images:")
		}
		if m := imageNameRE.FindStringSubmatch(line); m != nil && inImages {
			current = m[2]
			if _, ok := digests[current]; !ok {
				unknown = append(unknown, current)
			}
			continue
		}
		if m := seedImageRE.FindStringSubmatch(line); m != nil {
			repo := m[2]
			if j := strings.LastIndex(repo, ":"); j > strings.LastIndex(repo, "/") {
				repo = repo[:j]
			}
			path := repo
			if j := strings.Index(path, "/"); j >= 0 {
				path = path[j+1:]
			}
			if d, ok := byPath[path]; ok {
				if d != "" {
					lines[i] = m[1] + m[2] + "@" + d
					updated++
				}
			} else {
				unknown = append(unknown, repo)
			}
			continue
		}
		if m := mirrorRepoRE.FindStringSubmatch(line); m != nil {
			current = m[2]
			path := current
			if j := strings.Index(path, "/"); j >= 0 {
				path = path[j+1:]
			}
			if d, ok := byPath[path]; ok {
				digests[current] = d
			} else {
				unknown = append(unknown, current)
			}
			continue
		}
		if m := digestRE.FindStringSubmatch(line); m != nil && current != "" {
			if d, ok := digests[current]; ok && d != "" {
				lines[i] = m[1] + "digest: " + d
				updated++
			}
		}
	}
	if len(unknown) > 0 {
		return 0, fmt.Errorf("%s lists images images.txt does not: %s", path, strings.Join(unknown, ", "))
	}
	return updated, os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644)
}

// Record pins the image at pushed (a digest reference) in images.txt: the line whose
// repository has the same path (the registry host aside, so a line naming the public
// registry takes the digest of a push to a mirror of it, which serves the same content)
// becomes <its repository>:<tag>@<digest>. The file is edited in place, the rest kept.
// It returns the entry written, and fails when no line or more than one names that path.
func Record(path string, pushed name.Digest, tag string) (Entry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Entry{}, err
	}
	entries, problems := Parse(strings.NewReader(string(data)))
	for _, p := range problems {
		if strings.Contains(p.Message, "already listed") {
			return Entry{}, fmt.Errorf("%s: %s", path, p)
		}
	}
	want := repositoryPath(pushed.Context().Name())
	var match *Entry
	for i, e := range entries {
		if repositoryPath(e.Repository) != want {
			continue
		}
		if match != nil {
			return Entry{}, fmt.Errorf("%s: lines %d and %d both name %s", path, match.Line, e.Line, want)
		}
		match = &entries[i]
	}
	if match == nil {
		return Entry{}, fmt.Errorf("%s lists no image %s to record %s in", path, want, pushed.DigestStr())
	}
	lines := strings.Split(string(data), "\n")
	ref := match.Repository + ":" + tag + "@" + pushed.DigestStr()
	indent := lines[match.Line-1][:len(lines[match.Line-1])-len(strings.TrimLeft(lines[match.Line-1], " \t"))]
	lines[match.Line-1] = indent + ref
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		return Entry{}, err
	}
	return Entry{Line: match.Line, Ref: ref, Repository: match.Repository, Tag: tag, Digest: pushed.DigestStr()}, nil
}

// repositoryPath is a repository name without its registry host.
func repositoryPath(repo string) string {
	if i := strings.Index(repo, "/"); i >= 0 {
		return repo[i+1:]
	}
	return repo
}
