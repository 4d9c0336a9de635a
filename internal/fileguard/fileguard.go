// Package fileguard says what is wrong with a file Eva was about to read or write in a
// folder it confines itself to: not a regular file (a link, a FIFO, a device, a socket,
// a folder), or a regular file with more than one hard link, whose other name may be
// outside the folder.
package fileguard

import (
	"fmt"
	"io/fs"
)

// Kind names what a file that is not a regular file is: "a symlink", "a FIFO",
// "a device", "a socket", "a folder", or "not a regular file".
func Kind(m fs.FileMode) string {
	switch t := m.Type(); {
	case t&fs.ModeSymlink != 0:
		return "a symlink"
	case t&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case t&(fs.ModeDevice|fs.ModeCharDevice) != 0:
		return "a device"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t.IsDir():
		return "a folder"
	}
	return "not a regular file"
}

// SoleLink returns why a regular file described by fi may not be read or written as
// the folder's own: it has more than one hard link (the other may be a file outside
// the folder, such as a credential of the machine running Eva). Empty when it has one,
// or where the platform does not say.
func SoleLink(fi fs.FileInfo) string {
	if n := linkCount(fi); n > 1 {
		return fmt.Sprintf("a hard link (%d links)", n)
	}
	return ""
}
