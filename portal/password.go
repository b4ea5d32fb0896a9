package portal

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/crypto/argon2"
)

// Argon2id parameters: OWASP's first recommended set (19 MiB, 2 passes,
// one lane), ~30–60 ms per check on the appliance's cores. They are stored
// in each hash, so raising them later leaves existing hashes verifiable.
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonKeyLen    = 32
	argonSaltLen   = 16
)

// MinPasswordLen and MaxPasswordLen bound an administrator's password, in
// bytes. The upper bound keeps a check's cost independent of the input.
const (
	MinPasswordLen = 12
	MaxPasswordLen = 256
)

// errBadHash is a stored hash that is not one this package wrote.
var errBadHash = errors.New("portal: unrecognised password hash")

// hashPassword returns password's argon2id hash in the PHC string format:
// $argon2id$v=19$m=<KiB>,t=<passes>,p=<lanes>$<salt>$<hash>, base64
// without padding.
func hashPassword(password string) string {
	salt := make([]byte, argonSaltLen)
	_, _ = rand.Read(salt)
	sum := argon2.IDKey([]byte(password), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemoryKiB, argonTime, argonThreads, enc.EncodeToString(salt), enc.EncodeToString(sum))
}

// checkPassword reports whether password matches hash, in time that does
// not depend on where they differ.
func checkPassword(hash, password string) (bool, error) {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return false, errBadHash
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, errBadHash
	}
	var memory, passes uint32
	var lanes uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &passes, &lanes); err != nil ||
		memory == 0 || memory > 256<<10 || passes == 0 || passes > 16 || lanes == 0 {
		return false, errBadHash
	}
	enc := base64.RawStdEncoding
	salt, err := enc.DecodeString(parts[4])
	if err != nil || len(salt) < 8 {
		return false, errBadHash
	}
	want, err := enc.DecodeString(parts[5])
	if err != nil || len(want) < 16 || len(want) > 64 {
		return false, errBadHash
	}
	got := argon2.IDKey([]byte(password), salt, passes, memory, lanes, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// dummyHash is checked against when an account does not exist, so that a
// sign-in for an unknown user costs as much as one for a known user.
// It is made on first use, not when the program starts.
var dummyHash = sync.OnceValue(func() string { return hashPassword("tollgate portal: no such administrator") })
