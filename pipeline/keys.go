package pipeline

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"sync"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/oslayer/oslayer/sign"
)

// maxKeys bounds the decrypted signing keys a Keys holds.
const maxKeys = 64

// Keys holds decrypted signing keys by the digest of the encrypted key
// and its password, for the builds of one process (a fleet run, a
// controller). Decrypting a cosign key (scrypt) costs about a second of
// CPU and 64 MB of memory, more than the rest of a build: without it,
// every build paid that, and builds at once multiplied the memory. A
// changed key or password is a new entry; concurrent builds with one key
// decrypt it once. The zero Keys is ready to use.
type Keys struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]*keyEntry
}

type keyEntry struct {
	once sync.Once
	sv   signature.SignerVerifier
	err  error
}

// Signer returns the decrypted key of km, with its own password or, when
// it carries none, pass's (nil: empty). A nil Keys decrypts every time.
func (c *Keys) Signer(km *sign.KeyMaterial, pass sign.PassFunc) (signature.SignerVerifier, error) {
	if !km.HasPassword && pass != nil {
		p, err := pass()
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", km.Source, err)
		}
		k := *km
		k.Password, k.HasPassword = p, true
		km = &k
	}
	if c == nil {
		return km.Decrypt(nil)
	}
	h := sha256.New()
	writeField(h, km.PEM)
	writeField(h, km.Password)
	if km.HasPassword {
		h.Write([]byte{1})
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxKeys {
		c.m = map[[sha256.Size]byte]*keyEntry{}
	}
	e := c.m[k]
	if e == nil {
		e = &keyEntry{}
		c.m[k] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.sv, e.err = km.Decrypt(nil) })
	return e.sv, e.err
}

// writeField writes b with its length, so that two fields never read as
// one.
func writeField(h hash.Hash, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}
