//go:build unix

package fileguard

import (
	"io/fs"
	"syscall"
)

// linkCount returns the number of hard links of a file, or 0 where the platform does
// not say.
func linkCount(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink) //nolint:unconvert // its width varies by platform
	}
	return 0
}
