package ids

import (
	"crypto/rand"
	"time"
)

// idAlphabet is Crockford-style lowercase base32 in ascending byte order:
// 32 symbols, so mapping a random byte's low five bits is unbiased, and
// fixed-width numbers written with it sort as they compare.
const idAlphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// NewRequest returns a new request id (the gateway's and the central
// plane's): req_ and 26 base32 characters, 10 of the time in milliseconds
// since the Unix epoch (50 bits, enough until the year 37648), then 16
// random ones (80 bits). Ids made later sort after earlier ones, so the
// audit log's request-id index grows at its right edge instead of dirtying
// a random page per request; 80 random bits per millisecond keep them
// unique.
func NewRequest() string { return RequestAt(time.Now()) }

// RequestAt is NewRequest at the instant t.
func RequestAt(t time.Time) string {
	var b [4 + 26]byte
	copy(b[:], RequestPrefix)
	ms := uint64(t.UnixMilli())
	for i := 13; i >= 4; i-- {
		b[i] = idAlphabet[ms&31]
		ms >>= 5
	}
	_, _ = rand.Read(b[14:])
	for i := 14; i < len(b); i++ {
		b[i] = idAlphabet[b[i]&31]
	}
	return string(b[:])
}
