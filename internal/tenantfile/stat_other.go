//go:build !linux

package tenantfile

import "os"

// identityOf is not known on this platform: size and modification time alone cannot
// tell an edit that kept them (cp -p, rsync -a, touch -r), so no file is reused and
// every render decodes every tenant file.
func identityOf(os.FileInfo) (Known, bool) { return Known{}, false }

// regularFileIdentity is not known on this platform either (see identityOf).
func regularFileIdentity(string) (Known, bool) { return Known{}, false }

// readChecked is readPortably on this platform.
func readChecked(path string, info os.FileInfo) ([]byte, string) { return readPortably(path, info) }
