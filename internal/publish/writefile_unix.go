//go:build unix

package publish

import (
	"io"
	"io/fs"
	"syscall"
)

// pathError is the error os.WriteFile would return.
type pathError = fs.PathError

// overwriteFile writes data to a new or truncated file at path with mode 0644, as
// os.WriteFile does, in three system calls (open, write, close): an *os.File also
// registers the file with the runtime poller and a finalizer, which for the tens of
// thousands of small files of a fleet render costs as much as the write itself.
func overwriteFile(path string, data []byte) error {
	fd, err := openForWrite(path)
	if err != nil {
		return &pathError{Op: "open", Path: path, Err: err}
	}
	for len(data) > 0 {
		n, err := syscall.Write(fd, data)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			_ = syscall.Close(fd)
			return &pathError{Op: "write", Path: path, Err: err}
		}
		if n == 0 {
			_ = syscall.Close(fd)
			return &pathError{Op: "write", Path: path, Err: io.ErrShortWrite}
		}
		data = data[n:]
	}
	if err := syscall.Close(fd); err != nil {
		return &pathError{Op: "close", Path: path, Err: err}
	}
	return nil
}

func openForWrite(path string) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC|syscall.O_CLOEXEC, 0o644)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}
