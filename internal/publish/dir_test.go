package publish

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aidonow/eva/internal/render"
)

// TestDirWritesOnlyWhatChanged: a render into an empty folder writes every file (its
// folders made as it goes, by concurrent writers); a render into that folder again
// leaves unchanged files alone (same modification time), rewrites changed ones (a
// longer and a shorter content, no stale bytes left), writes a new tenant's files and
// removes those of a tenant no longer rendered.
func TestDirWritesOnlyWhatChanged(t *testing.T) {
	out := filepath.Join(t.TempDir(), "gitops")
	files := func(codes ...string) map[string]string {
		m := map[string]string{}
		for _, c := range codes {
			d := render.DirName(c)
			m["tenants/"+d+"/"+render.ManifestsFile] = "kind: Namespace # " + c + "\n"
			m["tenants/"+d+"/workloads/"+render.ManifestsFile] = "kind: HelmRelease # " + c + "\n"
			m["flux/"+d+".yaml"] = "kind: Kustomization # " + c + "\n"
		}
		return m
	}
	put := func(codes []string, want map[string]string) {
		t.Helper()
		d, err := OpenDir(out, codes, Safety{AllowMassDelete: true})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(want))
		for p, data := range want {
			wg.Go(func() { errs <- d.Put(render.File{Path: p, Data: []byte(data)}) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Finish(); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		err = filepath.WalkDir(out, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			rel, _ := filepath.Rel(out, p)
			got[filepath.ToSlash(rel)] = string(data)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Errorf("%d files, want %d: %v", len(got), len(want), got)
		}
		for p, data := range want {
			if got[p] != data {
				t.Errorf("%s: %q, want %q", p, got[p], data)
			}
		}
	}
	first := files("AAAAAA", "BBBBBB", "CCCCCC")
	// CCCCCC is decommissioned, so the next render may leave it out.
	first["tenants/"+render.DirName("CCCCCC")+"/"+render.ManifestsFile] += "  " + string(decommissionedMarker)
	put([]string{"AAAAAA", "BBBBBB", "CCCCCC"}, first)

	// Back-date every file, so a rewrite shows in its modification time.
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	for p := range first {
		if err := os.Chtimes(filepath.Join(out, p), old, old); err != nil {
			t.Fatal(err)
		}
	}
	second := files("AAAAAA", "BBBBBB", "DDDDDD")
	longer := "tenants/" + render.DirName("AAAAAA") + "/" + render.ManifestsFile
	shorter := "flux/" + render.DirName("BBBBBB") + ".yaml"
	second[longer] = first[longer] + "kind: ResourceQuota\n"
	second[shorter] = "kind: X\n"
	put([]string{"AAAAAA", "BBBBBB", "DDDDDD"}, second)
	for p := range second {
		st, err := os.Stat(filepath.Join(out, p))
		if err != nil {
			t.Fatal(err)
		}
		rewritten := !st.ModTime().Equal(old)
		if want := first[p] != second[p]; rewritten != want {
			t.Errorf("%s rewritten: %v, want %v", p, rewritten, want)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "tenants", render.DirName("CCCCCC"))); !os.IsNotExist(err) {
		t.Errorf("the folder of a tenant no longer rendered is still there (%v)", err)
	}
}
