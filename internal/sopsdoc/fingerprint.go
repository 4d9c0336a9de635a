package sopsdoc

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"strings"

	"filippo.io/age/armor"
	"go.yaml.in/yaml/v3"
)

// fingerprints names what a copy of this encrypted document must carry to decrypt: the
// initialization vector of each encrypted value (AES-GCM decrypts only with the one it
// encrypted with, and sops draws a new one for every value) and each age stanza holding
// the data key, both decoded, so a copy re-encoded (other base64 padding, other armor
// lines) still has them. kustomize-controller does not check SOPS' MAC, so another
// tenant's file copied with its name and namespace changed would decrypt in this
// tenant's namespace with the environment's key: a fingerprint seen in two tenants'
// files shows such a copy.
func fingerprints(root *yaml.Node) []string {
	var out []string
	add := func(kind string, b []byte) {
		sum := sha256.Sum256(b)
		out = append(out, kind+":"+hex.EncodeToString(sum[:]))
	}
	fields := mapping(root)
	for _, section := range []string{"data", "stringData"} {
		for _, v := range mapping(fields[section]) {
			m := encryptedPartsRE.FindStringSubmatch(v.Value)
			if m == nil {
				continue
			}
			iv, err := base64.StdEncoding.DecodeString(m[2])
			if err != nil {
				iv = []byte(m[2])
			}
			add("iv", iv)
		}
	}
	if age := mapping(fields["sops"])["age"]; age != nil {
		for _, stanza := range age.Content {
			enc := mapping(stanza)["enc"]
			if enc == nil {
				continue
			}
			key, err := io.ReadAll(io.LimitReader(armor.NewReader(strings.NewReader(enc.Value)), MaxBytes))
			if err != nil || len(key) == 0 {
				key = []byte(enc.Value)
			}
			add("age", key)
		}
	}
	return out
}
