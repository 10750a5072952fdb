package controller

import (
	"crypto/sha256"
	"sync"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/oslayer/oslayer/sign"
)

// maxKeys bounds the decrypted signing keys a keyCache holds.
const maxKeys = 64

// keyCache holds decrypted signing keys by the digest of the encrypted key
// and its password. Decrypting a cosign key (scrypt) costs about a second
// of CPU and 64 MB of memory, more than the rest of a build: without it,
// every build paid that, and builds at once multiplied the memory. A
// changed Secret is a new entry; concurrent builds with one key decrypt it
// once.
type keyCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]*keyEntry
}

type keyEntry struct {
	once sync.Once
	sv   signature.SignerVerifier
	err  error
}

// signer returns the decrypted key of km.
func (c *keyCache) signer(km *sign.KeyMaterial) (signature.SignerVerifier, error) {
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
