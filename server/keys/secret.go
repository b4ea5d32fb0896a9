package keys

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"

	"github.com/tollgate-dev/tollgate/internal/ids"
)

const (
	// SecretPrefix starts every secret, generated or declared.
	SecretPrefix = "tgk_"
	// MinSecretLen is the shortest secret a seed may declare. Generated
	// secrets are SecretPrefix plus 43 characters.
	MinSecretLen = 12
	// secretBytes of randomness in a generated secret.
	secretBytes = 32
	// hintLen characters of the secret at most are kept as its hint.
	hintLen = 8
)

// HashSecret returns the SHA-256 of secret, the only form in which a secret
// is stored or compared. Secrets of up to 128 bytes are hashed from a stack
// buffer, so the request path does not allocate.
func HashSecret(secret string) [sha256.Size]byte {
	var buf [128]byte
	if len(secret) <= len(buf) {
		n := copy(buf[:], secret)
		return sha256.Sum256(buf[:n])
	}
	return sha256.Sum256([]byte(secret))
}

// hashesEqual compares two secret hashes in constant time.
func hashesEqual(a, b *[sha256.Size]byte) bool {
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// newSecret returns SecretPrefix and the unpadded base64url form of 32
// random bytes: 47 characters in all.
func newSecret() string {
	var b [secretBytes]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails; it crashes the program instead
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// secretHint is the start of secret, shown to recognise a key in a list:
// hintLen characters, or half of a short (declared) secret.
func secretHint(secret string) string {
	return secret[:min(hintLen, len(secret)/2)]
}

// newKeyID returns key_ and 26 random lower-case base32 characters (130
// bits), which sort like the bytes they are.
func newKeyID() string {
	return ids.KeyPrefix + strings.ToLower(rand.Text())
}
