package project

import (
	"io/fs"
	"syscall"
)

// ownerOf is the user owning a file, when the system says.
func ownerOf(info fs.FileInfo) (int, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
