// Package docsection keeps a generated section of a documentation page equal to what
// the code says: the operator's flag table, the evactl reference. Tests call Keep.
package docsection

import (
	"fmt"
	"os"
	"strings"
)

// UpdateEnv, set to 1, makes Keep rewrite the sections instead of failing.
const UpdateEnv = "EVA_UPDATE_DOCS"

// Keep compares the text of the page at path between the start and end marker lines
// with want. With EVA_UPDATE_DOCS=1 it rewrites a section that differs; otherwise it
// returns an error saying so, with the command (regenerate) that rewrites it.
func Keep(path, start, end, want, regenerate string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text := string(data)
	from, to := strings.Index(text, start), strings.Index(text, end)
	if from < 0 || to < from {
		return fmt.Errorf("%s has no section between %q and %q", path, start, end)
	}
	if text[from+len(start):to] == want {
		return nil
	}
	if os.Getenv(UpdateEnv) == "1" {
		return os.WriteFile(path, []byte(text[:from+len(start)]+want+text[to:]), 0o644)
	}
	return fmt.Errorf("%s differs from the code; run %s=1 %s. Want:\n%s", path, UpdateEnv, regenerate, want)
}
