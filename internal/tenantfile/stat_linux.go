package tenantfile

import (
	"os"
	"syscall"
)

// readChecked reads the regular file Lstat described as info, at most MaxFileBytes+1
// bytes, refusing it when the path no longer names that file (swapped for a link, a
// device or another file since). It does what readPortably does in six system calls
// instead of eleven: os.Open tries to register every file with the network poller
// and sets and clears its non-blocking flag around that, which costs a fleet render
// tens of thousands of calls. The file is opened non-blocking and without following a
// link, so a FIFO or a link swapped in cannot make it block or read elsewhere.
func readChecked(path string, info os.FileInfo) ([]byte, string) {
	want, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return readPortably(path, info)
	}
	var fd int
	var err error
	for {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err == syscall.ELOOP {
		return nil, changedWhileRead
	}
	if err != nil {
		return nil, "cannot read: " + err.Error()
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Dev != want.Dev || st.Ino != want.Ino ||
		st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, changedWhileRead
	}
	size := min(max(st.Size, 0), MaxFileBytes) + 1
	data := make([]byte, 0, size)
	for len(data) <= MaxFileBytes {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := syscall.Read(fd, data[len(data):cap(data)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, "cannot read: " + err.Error()
		}
		if n == 0 {
			break
		}
		data = data[:len(data)+n]
	}
	return data, ""
}

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
