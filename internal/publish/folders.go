package publish

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
)

// folders makes sure of the folders a render writes into, each once (by whichever
// writer comes first; the others wait for it), and remembers which ones the render
// created: those hold nothing but what it writes, so a file in one needs no reading
// before it is written, and a render into an empty folder costs one system call per
// file less to look for what is there. A folder's parents are made sure of before it,
// and a folder found already there is checked to be one (not a symlink to elsewhere).
// It is safe for concurrent use.
type folders struct {
	out   *outDir
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

// newFolders starts with the root of out, which exists and was not made by this
// render. Folders are named by their path in out, in the OS's form.
func newFolders(out *outDir) *folders {
	top := &folderState{}
	top.once.Do(func() {})
	return &folders{out: out, state: map[string]*folderState{".": top}}
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
		if _, err := f.ensure(filepath.Dir(dir)); err != nil {
			st.err = err
			return
		}
		err := f.out.root.Mkdir(dir, 0o755)
		switch {
		case err == nil:
			st.made = true
		case errors.Is(err, fs.ErrExist):
			// Made before this render: files in it are read before they are written,
			// once it is known to be a folder.
			_, st.err = f.out.checkDir(dir)
		default:
			st.err = fmt.Errorf("making %s: %w", f.out.full(dir), err)
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
