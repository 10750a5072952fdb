package pipeline

import (
	"sync"
	"testing"

	"github.com/oslayer/oslayer/sign"
)

// TestKeyCache: one key decrypts once however many builds ask at once; a
// changed key or password is decrypted anew; a wrong password fails.
func TestKeyCache(t *testing.T) {
	kp, err := sign.GenerateKeyPair([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	var c Keys
	km := func(pw string) *sign.KeyMaterial {
		return &sign.KeyMaterial{Source: "test", PEM: kp.Private, Password: []byte(pw), HasPassword: true}
	}
	first, err := c.Signer(km("pw"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sv, err := c.Signer(km("pw"), nil); err != nil || sv != first {
				t.Errorf("the same key: %v, same signer %v", err, sv == first)
			}
		}()
	}
	wg.Wait()
	if _, err := c.Signer(km("wrong"), nil); err == nil {
		t.Error("a wrong password decrypted the key")
	}
	other, err := sign.GenerateKeyPair([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := c.Signer(&sign.KeyMaterial{Source: "test", PEM: other.Private, Password: []byte("pw"), HasPassword: true}, nil)
	if err != nil || sv == first {
		t.Errorf("another key: %v, same signer %v", err, sv == first)
	}
}
