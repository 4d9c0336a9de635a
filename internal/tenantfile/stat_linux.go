package tenantfile

import (
	"os"
	"syscall"
)

// changeTimeAndInode returns a file's status change time (Unix nanoseconds) and inode:
// a file replaced by another of the same size and modification time still differs in
// them.
func changeTimeAndInode(info os.FileInfo) (int64, uint64) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0
	}
	return st.Ctim.Nano(), st.Ino
}
