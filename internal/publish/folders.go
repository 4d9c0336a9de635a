package publish

import (
	"os"
	"path/filepath"
	"sync"
)

// folders makes sure of the folders a render writes into, each once (by whichever
// writer comes first; the others wait for it), and remembers which ones the render
// created: those hold nothing but what it writes, so a file in one needs no reading
// before it is written, and a render into an empty folder costs one system call per
// file less to look for what is there and one less to make its folder. It is safe for
// concurrent use.
type folders struct {
	mu    sync.Mutex
	state map[string]*folderState
}

// folderState is what one folder's first writer found: whether it created the folder,
// or the error making it.
type folderState struct {
	once sync.Once
	made bool
	err  error
}

// newFolders starts with root, which exists and was not made by this render.
func newFolders(root string) *folders {
	top := &folderState{}
	top.once.Do(func() {})
	return &folders{state: map[string]*folderState{filepath.Clean(root): top}}
}

// ensure makes sure dir exists (its parents too) and reports whether this render
// created it, by this call or an earlier one.
func (f *folders) ensure(dir string) (created bool, err error) {
	f.mu.Lock()
	st, known := f.state[dir]
	if !known {
		st = &folderState{}
		f.state[dir] = st
	}
	f.mu.Unlock()
	st.once.Do(func() {
		err := os.Mkdir(dir, 0o755)
		if os.IsNotExist(err) {
			if _, err = f.ensure(filepath.Dir(dir)); err != nil {
				st.err = err
				return
			}
			err = os.Mkdir(dir, 0o755)
		}
		switch {
		case err == nil:
			st.made = true
		case os.IsExist(err):
			// Made before this render: files in it are read before they are written.
		default:
			st.err = err
		}
	})
	return st.made, st.err
}

// created reports whether this render created dir. Call it after the writers are done.
func (f *folders) created(dir string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.state[dir]
	return st != nil && st.made
}
