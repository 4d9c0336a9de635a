//go:build !linux

package tenantfile

import "os"

// changeTimeAndInode is not read on this platform: size and modification time alone
// cannot tell an edit that kept them (cp -p, rsync -a, touch -r), so no file is reused
// and every render decodes every tenant file.
func changeTimeAndInode(os.FileInfo) (ctime int64, inode uint64, ok bool) { return 0, 0, false }

// regularFileIdentity is not known on this platform (see changeTimeAndInode): no file
// is reused.
func regularFileIdentity(string) (Known, bool) { return Known{}, false }
