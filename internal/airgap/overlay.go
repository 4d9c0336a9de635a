package airgap

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

var (
	imageNameRE = regexp.MustCompile(`^(\s*)-\s*name:\s*(\S+)\s*$`)
	digestRE    = regexp.MustCompile(`^(\s*)digest:\s*\S+\s*$`)
)

// SyncOverlay sets the digest of every entry of a kustomization's `images:` list whose
// name is an images.txt repository to the digest images.txt pins, so the air-gap overlay
// always deploys exactly the pinned images. The file is edited line by line: comments
// and layout stay. It returns how many digests it set, and fails on a listed image that
// images.txt does not know.
func SyncOverlay(path string, entries []Entry) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	digests := map[string]string{}
	for _, e := range entries {
		digests[e.Repository] = e.Digest
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
