package sopsdoc

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"filippo.io/age"
	"filippo.io/age/armor"
	"go.yaml.in/yaml/v3"
)

// encryptedPartsRE takes an AES-GCM value SOPS wrote apart.
var encryptedPartsRE = regexp.MustCompile(`^ENC\[AES256_GCM,data:([A-Za-z0-9+/=]*),iv:([A-Za-z0-9+/=]+),tag:([A-Za-z0-9+/=]+),type:([a-z]+)\]$`)

// Decrypt decrypts an encrypted tenant Secret (a document Check accepted) in memory with
// the age identities, as kustomize-controller does: the data key from the first age
// stanza an identity opens, every value with AES-GCM bound to its path, and SOPS'
// message authentication code over every value in document order (the name and
// namespace included) verified before anything is returned. It returns the Secret's
// values by key (data values base64-decoded). Nothing is written anywhere, and no error
// carries a value.
func Decrypt(doc []byte, identities ...age.Identity) (map[string][]byte, error) {
	_, root, err := single(doc)
	if err != nil {
		return nil, err
	}
	meta := mapping(mapping(root)["sops"])
	key, err := dataKey(meta["age"], identities)
	if err != nil {
		return nil, err
	}
	defer clear(key)
	mac, modified := meta["mac"], meta["lastmodified"]
	if mac == nil || modified == nil {
		return nil, errors.New("the document has no message authentication code")
	}
	w := &walker{key: key, hash: sha512.New(), values: map[string][]byte{}}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k := root.Content[i].Value; k != "sops" {
			if err := w.walk(root.Content[i+1], []string{k}); err != nil {
				return nil, err
			}
		}
	}
	// SOPS encrypts the MAC bound to the time of the last change, as RFC 3339.
	at, err := time.Parse(time.RFC3339, modified.Value)
	if err != nil {
		return nil, fmt.Errorf("sops.lastmodified: %w", err)
	}
	want, err := decryptValue(mac.Value, key, at.Format(time.RFC3339))
	if err != nil {
		return nil, fmt.Errorf("sops.mac: %w", err)
	}
	got := fmt.Sprintf("%X", w.hash.Sum(nil))
	if !hmac.Equal([]byte(got), want) {
		return nil, errors.New("the message authentication code does not match: the document was changed after it was encrypted")
	}
	return w.values, nil
}

// dataKey opens the document's data key with the first age stanza one of the
// identities can open.
func dataKey(stanzas *yaml.Node, identities []age.Identity) ([]byte, error) {
	if stanzas == nil || stanzas.Kind != yaml.SequenceNode || len(identities) == 0 {
		return nil, errors.New("no age recipient to decrypt with")
	}
	for _, s := range stanzas.Content {
		enc := mapping(s)["enc"]
		if enc == nil {
			continue
		}
		r, err := age.Decrypt(armor.NewReader(strings.NewReader(enc.Value)), identities...)
		if err != nil {
			continue // encrypted for another recipient
		}
		key, err := io.ReadAll(io.LimitReader(r, 64))
		if err != nil || len(key) != 32 {
			return nil, errors.New("the data key is not a 256-bit key")
		}
		return key, nil
	}
	return nil, errors.New("none of the age keys given can open the document's data key: it is not encrypted for this cluster")
}

// walker visits every value in document order, as SOPS does, feeding the MAC and
// collecting the Secret's values.
type walker struct {
	key    []byte
	hash   hash.Hash
	values map[string][]byte
}

func (w *walker) walk(n *yaml.Node, path []string) error {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := w.walk(n.Content[i+1], append(path[:len(path):len(path)], n.Content[i].Value)); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for _, item := range n.Content {
			if err := w.walk(item, path); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		return w.scalar(n, path)
	default:
		return fmt.Errorf("%s: unsupported YAML node", strings.Join(path, "."))
	}
	return nil
}

func (w *walker) scalar(n *yaml.Node, path []string) error {
	field := strings.Join(path, ".")
	var plain []byte
	if n.Tag == "!!str" && encryptedPartsRE.MatchString(n.Value) {
		v, err := decryptValue(n.Value, w.key, strings.Join(path, ":")+":")
		if err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		plain = v
	} else {
		// Unencrypted values count in the MAC as SOPS reads them from YAML.
		switch n.Tag {
		case "!!str":
			plain = []byte(n.Value)
		case "!!int":
			i, err := strconv.Atoi(n.Value)
			if err != nil {
				return fmt.Errorf("%s: %w", field, err)
			}
			plain = []byte(strconv.Itoa(i))
		case "!!bool":
			plain = []byte("False")
			if b, _ := strconv.ParseBool(strings.ToLower(n.Value)); b {
				plain = []byte("True")
			}
		default:
			return fmt.Errorf("%s: unsupported value type %s", field, n.Tag)
		}
	}
	w.hash.Write(plain)
	if len(path) == 2 {
		switch path[0] {
		case "stringData":
			w.values[path[1]] = plain
		case "data":
			v, err := base64.StdEncoding.DecodeString(string(plain))
			if err != nil {
				return fmt.Errorf("%s: not base64 once decrypted", field)
			}
			w.values[path[1]] = v
		}
	}
	return nil
}

// decryptValue opens one AES-GCM value bound to the additional data (its path, or the
// time of the last change for the MAC). Only string values are supported: a Secret holds
// nothing else.
func decryptValue(value string, key []byte, additional string) ([]byte, error) {
	m := encryptedPartsRE.FindStringSubmatch(value)
	if m == nil {
		return nil, errors.New("not an AES-GCM value written by sops")
	}
	data, err1 := base64.StdEncoding.DecodeString(m[1])
	iv, err2 := base64.StdEncoding.DecodeString(m[2])
	tag, err3 := base64.StdEncoding.DecodeString(m[3])
	if err := errors.Join(err1, err2, err3); err != nil || len(iv) == 0 {
		return nil, errors.New("malformed encrypted value")
	}
	if m[4] != "str" {
		return nil, fmt.Errorf("encrypted value of type %s: only strings are supported", m[4])
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, len(iv))
	if err != nil {
		return nil, err
	}
	plain, err := gcm.Open(nil, iv, bytes.Join([][]byte{data, tag}, nil), []byte(additional))
	if err != nil {
		return nil, errors.New("cannot decrypt: the value was changed, moved, or encrypted with another key")
	}
	return plain, nil
}
