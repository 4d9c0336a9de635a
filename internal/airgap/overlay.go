package airgap

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

var (
	imageNameRE  = regexp.MustCompile(`^(\s*)-\s*name:\s*(\S+)\s*$`)
	mirrorRepoRE = regexp.MustCompile(`^(\s*)repository:\s*(\S+)\s*$`)
	digestRE     = regexp.MustCompile(`^(\s*)digest:\s*\S+\s*$`)
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
		digests[e.Repository] = e.Digest
		if i := strings.Index(e.Repository, "/"); i >= 0 {
			byPath[e.Repository[i+1:]] = e.Digest
		}
	}
	lines := strings.Split(string(data), "\n")
	current, updated := "", 0
	var unknown []string
	for i, line := range lines {
		if m := imageNameRE.FindStringSubmatch(line); m != nil {
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
				lines[i] = m[1] + m[2] + "@" + d
				updated++
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
			if d, ok := digests[current]; ok {
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
