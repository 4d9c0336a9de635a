package tenant

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// builtinOwned are platform-owned in every catalog, so a replacement catalog cannot
// hand them to tenants by omission: the capsule identity and the Secrets mounted are
// Eva's, and the image is what images.txt, the air-gap mirror and image verification
// vouch for.
var builtinOwned = []string{ReservedValuesKey, SecretMountsValuesKey, "image"}

// ownedPathRE is the syntax of a platform-owned path: dotted values keys, optionally
// after "**." to own the key at any depth (worker.securityContext as well as
// securityContext).
var ownedPathRE = regexp.MustCompile(`^(\*\*\.)?[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// anyDepth is the prefix of a platform-owned path that matches at any depth.
const anyDepth = "**."

// ownedPath is one platform-owned path, split into folded keys.
type ownedPath struct {
	keys     []string
	anyDepth bool
}

// ownedPaths returns the platform-owned values paths of a module: the built-in ones,
// the catalog-wide list and the module's own list.
// The lists are split and folded once per distinct list (ownedCache): validating a
// fleet asks for the same few modules' paths for every tenant. The result is shared:
// callers only read it.
func (c *Catalog) ownedPaths(module string) []ownedPath {
	all := make([]string, 0, len(builtinOwned)+len(c.PlatformOwned)+len(c.Modules[module].PlatformOwned))
	all = append(all, builtinOwned...)
	all = append(all, c.PlatformOwned...)
	all = append(all, c.Modules[module].PlatformOwned...)
	key := strings.Join(all, "\x00")
	if cached, ok := ownedCache.Load(key); ok {
		return cached.([]ownedPath)
	}
	paths := make([]ownedPath, 0, len(all))
	for _, p := range all {
		rest, deep := strings.CutPrefix(p, anyDepth)
		paths = append(paths, ownedPath{keys: strings.Split(FoldKey(rest), "."), anyDepth: deep})
	}
	ownedCache.Store(key, paths)
	return paths
}

// ownedCache maps a platform-owned list (joined with NUL, which no valid path holds)
// to its split and folded paths.
var ownedCache sync.Map

// ownedVerdict says whether a tenant may set the value at path (folded keys from the
// module's values root): "" when it may, otherwise why not. isMap tells whether the
// value set at path is a map, which Helm merges key by key into the platform's values
// instead of replacing them.
func ownedVerdict(owned []ownedPath, path []string, isMap bool) string {
	for _, op := range owned {
		o := op.keys
		if op.anyDepth {
			// Only the key itself (under any parent) is checked: the platform's values
			// hold no such keys deep down for a scalar to replace.
			for i := range path {
				if hasPrefix(path[i:], o) {
					return ownedMessage(o)
				}
			}
			continue
		}
		switch {
		case hasPrefix(path, o):
			return ownedMessage(o)
		case !isMap && hasPrefix(o, path):
			// A scalar, list or null here replaces (or, with null, deletes) the owned
			// values below it.
			return fmt.Sprintf("platform-owned: setting this replaces %s, which the platform sets", strings.Join(o, "."))
		}
	}
	return ""
}

func ownedMessage(o []string) string {
	if len(o) > 0 && o[0] == ReservedValuesKey {
		return "platform-owned: reserved, Eva sets the capsule identity (code and queue names) itself"
	}
	return fmt.Sprintf("platform-owned: the platform sets %s; tenants cannot override it", strings.Join(o, "."))
}

func hasPrefix(path, prefix []string) bool {
	return len(path) >= len(prefix) && slices.Equal(path[:len(prefix)], prefix)
}

func checkOwnedList(prefix string, paths []string) []string {
	var problems []string
	for _, p := range paths {
		if !ownedPathRE.MatchString(p) {
			problems = append(problems, fmt.Sprintf("%s: %q must be a dotted values path such as image.tag", prefix, p))
		}
	}
	return problems
}
