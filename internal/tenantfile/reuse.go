package tenantfile

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/tenant"
)

// racyWindow is how long after a file was recorded its modification time cannot tell
// a later edit apart (coarse file system clocks): such a file is always read again.
const racyWindow = time.Second

// Known is what a valid load recorded about one tenant file, for a later load to reuse:
// the file's identity on disk (size, times, inode) and content sum, and the few fields
// the checks across files need.
type Known struct {
	Size      int64  `json:"size"`
	ModTime   int64  `json:"mtime"` // Unix nanoseconds
	ChangeNs  int64  `json:"ctime,omitempty"`
	Inode     uint64 `json:"ino,omitempty"`
	Sum       string `json:"sum"` // hex SHA-256 of the content
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Code      string `json:"code"`
}

// LoadOptions tune LoadWith.
type LoadOptions struct {
	// Previous maps tenant file paths (as Load is given them) to what an earlier load
	// found when every file was valid, under the same catalog. A file that is still the
	// same on disk (regular, same size, modification and change times and inode, and not
	// modified within a second of Recorded) is neither read nor decoded: its tenant is a
	// stub (Tenant.Reused). A tenant with encrypted Secret files, now or then, is always
	// decoded, since its checks read its spec. Previous must be the Known of one valid
	// load: when every tenant is a stub, the checks across files are not run again.
	Previous map[string]Known
	// Recorded is when the load that produced Previous started.
	Recorded time.Time
	// withSecrets is the capsule codes that have Secret files in this load.
	withSecrets map[string]bool
}

// reuse returns the stub of a file the previous load knew and that has not changed.
func (o *LoadOptions) reuse(path string) *Tenant {
	k, ok := o.Previous[path]
	if !ok || o.withSecrets[k.Code] {
		return nil
	}
	now, identified := regularFileIdentity(path)
	if !identified || time.Unix(0, now.ModTime).Add(racyWindow).After(o.Recorded) {
		return nil
	}
	if now.Size != k.Size || now.ModTime != k.ModTime || now.ChangeNs != k.ChangeNs || now.Inode != k.Inode {
		return nil
	}
	t := &Tenant{File: path, Reused: true, known: &k}
	// The length first: hex.Decode writes past a destination too short for its input.
	if len(k.Sum) != hex.EncodedLen(len(t.Sum)) {
		return nil
	}
	if _, err := hex.Decode(t.Sum[:], []byte(k.Sum)); err != nil {
		return nil
	}
	t.Object = &evav1.EvaTenant{
		ObjectMeta: metav1.ObjectMeta{Name: k.Name, Namespace: k.Namespace},
		Spec:       evav1.EvaTenantSpec{CapsuleCode: k.Code},
	}
	return t
}

// codesWithSecrets returns the capsule codes named by Secret files (CODE.name.sops.yaml).
func codesWithSecrets(files []tenantPath) map[string]bool {
	out := map[string]bool{}
	for _, f := range files {
		if IsSecretFile(f.path) {
			code, _, _ := strings.Cut(filepath.Base(f.path), ".")
			out[code] = true
		}
	}
	return out
}

// knownOf records a file's identity on disk.
func knownOf(info os.FileInfo) Known {
	if k, ok := identityOf(info); ok {
		return k
	}
	return Known{Size: info.Size(), ModTime: info.ModTime().UnixNano()}
}

// Known returns what a later load may reuse of this load's tenant files, by path: every
// tenant without encrypted Secret files. Nil when the load found problems: nothing is
// reusable from an invalid set.
func (r *Result) Known() map[string]Known {
	if !r.Valid() {
		return nil
	}
	withSecrets := map[string]bool{}
	for _, s := range r.Secrets {
		withSecrets[s.Code] = true
	}
	out := make(map[string]Known, len(r.Tenants))
	for _, t := range r.Tenants {
		if t.known == nil || t.Object == nil || withSecrets[t.Object.Spec.CapsuleCode] {
			continue
		}
		k := *t.known
		if t.Reused {
			out[t.File] = k // what the previous load recorded, as it was
			continue
		}
		k.Sum = hex.EncodeToString(t.Sum[:])
		k.Name, k.Namespace, k.Code = t.Object.Name, t.Object.Namespace, t.Object.Spec.CapsuleCode
		out[t.File] = k
	}
	return out
}

// Reload decodes a reused tenant's file (LoadOptions.Previous) in full. It fails when the
// file no longer decodes into a valid tenant of the same capsule code and name, which
// means it changed after the load: the caller must not go on with a stale view.
func Reload(t *Tenant, catalog *tenant.Catalog) (*Tenant, error) {
	if !t.Reused {
		return t, nil
	}
	data, _, refusal := readTenantFile(t.File, filepath.Dir(t.File))
	if refusal != "" {
		return nil, fmt.Errorf("%s: %s", t.File, refusal)
	}
	full, problems := Parse(t.File, data, catalog)
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s changed while it was being rendered: %s", t.File, problems[0].String())
	}
	if full.Sum != t.Sum || full.Object.Spec.CapsuleCode != t.Object.Spec.CapsuleCode {
		return nil, fmt.Errorf("%s changed while it was being rendered; render again", t.File)
	}
	full.Object.Spec.Secrets = t.Object.Spec.Secrets
	full.known = t.known // the same file: what was recorded of it still holds
	return full, nil
}
