package tenantfile

import (
	"os"
	"syscall"
)

// changeTimeAndInode returns a file's status change time (Unix nanoseconds) and inode:
// a file edited or replaced keeping its size and modification time still differs in
// them. ok is false when they are not known, and then no file is reused.
func changeTimeAndInode(info os.FileInfo) (ctime int64, inode uint64, ok bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return st.Ctim.Nano(), st.Ino, true
}
