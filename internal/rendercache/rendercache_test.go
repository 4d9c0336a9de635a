package rendercache

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/aidonow/eva/internal/tenantfile"
)

func sample() *Cache {
	return &Cache{
		Commit:   "0123456789abcdef0123456789abcdef01234567",
		Key:      NewDigest().AddString("key").Sum(),
		Recorded: time.Unix(1700000000, 123456789),
		Tenants:  map[string]string{"ACMECO": "d1", "GLOBEX": "d2"},
		Files: map[string]tenantfile.Known{
			"tenants/ACMECO.yaml": {Size: 812, ModTime: 1699999999000000001, ChangeNs: 1699999999000000002, Inode: 1 << 40,
				Sum: "ab", Namespace: "eva-system", Name: "acmeco", Code: "ACMECO"},
		},
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := sample()
	if err := want.Save(dir); err != nil {
		t.Fatal(err)
	}
	got := Load(dir)
	if got == nil {
		t.Fatal("a saved cache does not load")
	}
	if !got.Recorded.Equal(want.Recorded) {
		t.Fatalf("recorded %v, want %v", got.Recorded, want.Recorded)
	}
	got.Recorded = want.Recorded
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded %+v, want %+v", got, want)
	}
	if !got.Fresh(want.Commit, want.Key) || got.Fresh("other", want.Key) || got.Fresh(want.Commit, "other") || got.Fresh("", want.Key) {
		t.Fatal("Fresh does not compare commit and key")
	}
	if err := os.Remove(filepath.Join(dir, File)); err != nil || Load(dir) != nil {
		t.Fatalf("removed cache still loads (%v)", err)
	}
}

// TestLoadRefusesDamage: a truncated, extended or other-version cache is no cache.
func TestLoadRefusesDamage(t *testing.T) {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	sample().encode(w)
	w.Flush()
	good := buf.Bytes()
	if _, err := decode(good); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"empty":       nil,
		"truncated":   good[:len(good)-3],
		"extended":    append(append([]byte{}, good...), 0),
		"not a cache": []byte("garbage"),
		"version 2":   bytes.Replace(append([]byte{}, good...), []byte(magic+"\x02"), []byte(magic+"\x04"), 1),
	} {
		if c, err := decode(data); err == nil {
			t.Errorf("%s: decoded %+v", name, c)
		}
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(File)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, File), good[:10], 0o600); err != nil {
		t.Fatal(err)
	}
	if Load(dir) != nil {
		t.Fatal("a truncated cache file loads")
	}
}

// FuzzDecode: whatever the file holds, reading it neither panics nor allocates beyond
// what the data could describe.
func FuzzDecode(f *testing.F) {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	sample().encode(w)
	w.Flush()
	f.Add(buf.Bytes())
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := decode(data)
		if err != nil {
			return
		}
		// What decodes encodes to a cache that decodes the same.
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		c.encode(w)
		w.Flush()
		again, err := decode(buf.Bytes())
		if err != nil {
			t.Fatalf("re-encoded cache does not decode: %v", err)
		}
		if !again.Recorded.Equal(c.Recorded) {
			t.Fatalf("recorded %v, then %v", c.Recorded, again.Recorded)
		}
		again.Recorded = c.Recorded
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("decoded %+v, re-decoded %+v", c, again)
		}
	})
}

func TestDigestSeparatesParts(t *testing.T) {
	if NewDigest().AddString("ab").AddString("c").Sum() == NewDigest().AddString("a").AddString("bc").Sum() {
		t.Fatal("parts are not separated")
	}
}
