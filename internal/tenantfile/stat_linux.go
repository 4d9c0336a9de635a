package tenantfile

import (
	"os"
	"syscall"
)

// identityOf returns a file's identity on disk: size, modification and status change
// times (Unix nanoseconds) and inode. A file edited or replaced keeping its size and
// modification time still differs in the last two. ok is false when they are not
// known, and then no file is reused.
func identityOf(info os.FileInfo) (Known, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return Known{}, false
	}
	return statIdentity(st), true
}

// regularFileIdentity is identityOf for the regular file at path, not following a
// symbolic link, without the allocations of os.Lstat: a render that changed nothing
// checks every tenant file so. ok is false for anything but a regular file, or when it
// cannot be read.
func regularFileIdentity(path string) (Known, bool) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return Known{}, false
	}
	return statIdentity(&st), true
}

func statIdentity(st *syscall.Stat_t) Known {
	return Known{Size: st.Size, ModTime: st.Mtim.Nano(), ChangeNs: st.Ctim.Nano(), Inode: st.Ino}
}
