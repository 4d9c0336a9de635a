//go:build !unix

package fileguard

import "io/fs"

// linkCount returns 0: this platform's file information says nothing of hard links.
func linkCount(fs.FileInfo) uint64 { return 0 }
