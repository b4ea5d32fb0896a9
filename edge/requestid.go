package edge

import "crypto/rand"

// idAlphabet is Crockford-style lowercase base32: 32 symbols, so mapping a
// random byte's low five bits is unbiased.
const idAlphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// newRequestID returns req_ and 26 random base32 characters (130 bits).
func newRequestID() string {
	var b [4 + 26]byte
	copy(b[:], "req_")
	_, _ = rand.Read(b[4:])
	for i := 4; i < len(b); i++ {
		b[i] = idAlphabet[b[i]&31]
	}
	return string(b[:])
}
