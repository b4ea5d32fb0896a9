package leaf

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"time"
)

// TimeLayout is the format of a leaf's time: RFC 3339, UTC, microseconds.
const TimeLayout = "2006-01-02T15:04:05.000000Z"

// SaltSize is the number of random bytes in a leaf's salt.
const SaltSize = 16

// FormatTime formats t for a leaf, in UTC, truncated to the microsecond.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// BodyHash returns the lowercase hex SHA-256 of a body (of nothing for nil).
func BodyHash(body []byte) string {
	sum := sha256.Sum256(body)
	var dst [2 * sha256.Size]byte // encoded on the stack: one allocation, the string
	hex.Encode(dst[:], sum[:])
	return string(dst[:])
}

// NewSalt returns SaltSize bytes from r (crypto/rand when nil) in lowercase
// hex.
func NewSalt(r io.Reader) (string, error) {
	if r == nil {
		// crypto/rand.Read fills b or ends the program; unlike a read
		// through an io.Reader, b stays on the stack.
		var b [SaltSize]byte
		_, _ = rand.Read(b[:])
		return hexSalt(&b), nil
	}
	b := new([SaltSize]byte)
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("leaf: salt: %w", err)
	}
	return hexSalt(b), nil
}

func hexSalt(b *[SaltSize]byte) string {
	var dst [2 * SaltSize]byte
	hex.Encode(dst[:], b[:])
	return string(dst[:])
}
