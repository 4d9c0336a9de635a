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

// regularFileIdentity returns the identity on disk (size, modification and change times,
// inode) of the regular file at path, not following a symbolic link, without the
// allocations of os.Lstat: a render that changed nothing checks every tenant file so.
// ok is false for anything but a regular file, or when it cannot be read.
func regularFileIdentity(path string) (k Known, ok bool) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return Known{}, false
	}
	return Known{Size: st.Size, ModTime: st.Mtim.Nano(), ChangeNs: st.Ctim.Nano(), Inode: st.Ino}, true
}
