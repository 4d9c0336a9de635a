package rendercache

import (
	"bufio"
	"encoding/binary"
	"errors"
	"time"

	"github.com/aidonow/eva/internal/tenantfile"
)

// The cache is stored in a compact form of its own, written as a stream and read in
// one piece: at 10,000 tenants a general-purpose encoder (JSON, gob) spends more time
// than the rest of a render that changed nothing.
//
//	magic, version
//	commit, key, recorded (Unix nanoseconds)
//	count, then per tenant: code, digest
//	count, then per file: path, size, mtime, ctime, inode, sum, namespace, name, code
//
// Strings are length-prefixed (uvarint), numbers are varints.
const magic = "eva-render-cache"

var errFormat = errors.New("render cache: unreadable")

// encode writes the cache; the writer keeps the first error for its Flush.
func (c *Cache) encode(w *bufio.Writer) {
	var scratch [binary.MaxVarintLen64]byte
	str := func(s string) {
		_, _ = w.Write(scratch[:binary.PutUvarint(scratch[:], uint64(len(s)))])
		_, _ = w.WriteString(s)
	}
	num := func(n int64) { _, _ = w.Write(scratch[:binary.PutVarint(scratch[:], n)]) }
	str(magic)
	num(formatVersion)
	str(c.Commit)
	str(c.Key)
	num(c.Recorded.UnixNano())
	num(int64(len(c.Tenants)))
	for code, digest := range c.Tenants {
		str(code)
		str(digest)
	}
	num(int64(len(c.Files)))
	for path, k := range c.Files {
		str(path)
		num(k.Size)
		num(k.ModTime)
		num(k.ChangeNs)
		num(int64(k.Inode))
		str(k.Sum)
		str(k.Namespace)
		str(k.Name)
		str(k.Code)
	}
}

// reader reads the fields encode wrote; the first error sticks. Its strings share one
// copy of the data: at 10,000 tenants, a string allocated per field cost more than the
// rest of the decode.
type reader struct {
	data string
	err  error
}

func (r *reader) num() int64 {
	if r.err != nil {
		return 0
	}
	n, size := varint(r.data, binary.Varint)
	if size <= 0 {
		r.err = errFormat
		return 0
	}
	r.data = r.data[size:]
	return n
}

func (r *reader) str() string {
	if r.err != nil {
		return ""
	}
	n, size := varint(r.data, binary.Uvarint)
	if size <= 0 || uint64(len(r.data)-size) < n {
		r.err = errFormat
		return ""
	}
	s := r.data[size : size+int(n)]
	r.data = r.data[size+int(n):]
	return s
}

// varint decodes a varint at the start of s with decode (binary.Varint or
// binary.Uvarint), from at most binary.MaxVarintLen64 bytes copied to the stack.
func varint[T int64 | uint64](s string, decode func([]byte) (T, int)) (T, int) {
	var buf [binary.MaxVarintLen64]byte
	return decode(buf[:copy(buf[:], s)])
}

// count reads a number of records, bounded by what the remaining data could hold.
func (r *reader) count() int {
	n := r.num()
	if n < 0 || n > int64(len(r.data)) {
		r.err = errFormat
		return 0
	}
	return int(n)
}

func decode(data []byte) (*Cache, error) {
	r := &reader{data: string(data)}
	if r.str() != magic || r.num() != formatVersion {
		return nil, errFormat
	}
	c := &Cache{Commit: r.str(), Key: r.str()}
	c.Recorded = time.Unix(0, r.num())
	n := r.count()
	c.Tenants = make(map[string]string, n)
	for range n {
		code := r.str()
		c.Tenants[code] = r.str()
	}
	n = r.count()
	c.Files = make(map[string]tenantfile.Known, n)
	for range n {
		path := r.str()
		k := tenantfile.Known{Size: r.num(), ModTime: r.num(), ChangeNs: r.num(), Inode: uint64(r.num())}
		k.Sum, k.Namespace, k.Name, k.Code = r.str(), r.str(), r.str(), r.str()
		c.Files[path] = k
	}
	if r.err != nil || len(r.data) != 0 {
		return nil, errFormat
	}
	return c, nil
}
