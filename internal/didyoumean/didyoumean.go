// Package didyoumean finds the name a user most likely meant among the names that
// exist: for "unknown field" errors in tenant files, release files, the project file
// and Helm values.
package didyoumean

import "strings"

// Nearest returns the known name closest to an unknown one, or "" when none is close:
// first a match ignoring case and separators (capsule_code → capsuleCode), then the
// nearest by edit distance within a third of the name's length.
func Nearest(unknown string, known []string) string {
	norm := normalize(unknown)
	for _, k := range known {
		if normalize(k) == norm {
			return k
		}
	}
	best, bestDist := "", len(unknown)/3+1
	for _, k := range known {
		if d := editDistance(strings.ToLower(unknown), strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

func normalize(s string) string {
	return strings.ToLower(strings.NewReplacer("_", "", "-", "", ".", "", " ", "").Replace(s))
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
