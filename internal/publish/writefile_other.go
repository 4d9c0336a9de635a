//go:build !unix

package publish

import "os"

// overwriteFile writes data to a new or truncated file at path with mode 0644.
func overwriteFile(path string, data []byte) error {
	return os.WriteFile(path, data, 0o644)
}
