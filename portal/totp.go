package portal

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"image/png"
	"strconv"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/hotp"
	"github.com/pquerna/otp/totp"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Two-step sign-in: time-based one-time codes (RFC 6238) from an
// authenticator app, in the parameters every such app reads from an
// otpauth:// link (SHA-1, 6 digits, 30 s), with a 160-bit secret.
const (
	totpPeriod = 30 * time.Second
	totpDigits = otp.DigitsSix
	// totpSkew is how many periods before or after the portal's clock a
	// code may be for: a phone's clock a little off still signs in.
	totpSkew = 1
	// totpIssuer names the portal in the authenticator app.
	totpIssuer = "Tollgate"
	// codeSize is the length of a code as typed.
	codeSize = 6
)

// totpStepPrefix holds, per account with two-step sign-in, the time step
// of the last code accepted: /tollgate/portal/totp-steps/<tenant>/<user>
// → decimal step. A code is accepted only for a later step, so a code
// seen over a shoulder or in a proxy's log cannot be used again. It is
// kept apart from the account so that a sign-in does not change the
// account, which would end its other sessions.
const totpStepPrefix = "/tollgate/portal/totp-steps/"

func totpStepKey(tenant, user string) string { return totpStepPrefix + tenant + "/" + user }

var (
	// errWrongCode is a code that is not right within totpSkew periods.
	errWrongCode = errors.New("portal: wrong two-step code")
	// errCodeUsed is a right code whose time step was accepted before.
	errCodeUsed = errors.New("portal: this two-step code was used already")
	// errNoTwoStep is an account without two-step sign-in.
	errNoTwoStep = errors.New("portal: the account has no two-step sign-in")
)

// newTOTPLink returns the otpauth:// link of a new secret for tenant's
// administrator user, which an authenticator app reads (from its QR
// code) to make the codes.
func newTOTPLink(tenant, user string) (string, error) {
	key, err := totp.Generate(totp.GenerateOpts{
		Issuer:      totpIssuer,
		AccountName: tenant + "/" + user,
		Period:      uint(totpPeriod / time.Second),
		Digits:      totpDigits,
		Algorithm:   otp.AlgorithmSHA1,
	})
	if err != nil {
		return "", fmt.Errorf("portal: new two-step secret: %w", err)
	}
	return key.URL(), nil
}

// linkSecret is the base32 secret of an otpauth:// link that
// newTOTPLink made.
func linkSecret(link string) (string, error) {
	key, err := otp.NewKeyFromURL(link)
	if err != nil {
		return "", fmt.Errorf("portal: two-step link: %w", err)
	}
	return key.Secret(), nil
}

// totpQR draws link as a QR code in PNG.
func totpQR(link string) ([]byte, error) {
	key, err := otp.NewKeyFromURL(link)
	if err != nil {
		return nil, err
	}
	img, err := key.Image(240, 240)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// codeStep returns the time step that code is right for, within totpSkew
// periods of now; false when it is right for none. Every candidate is
// computed and compared in constant time.
func codeStep(secret, code string, now time.Time) (int64, bool) {
	if len(code) != codeSize {
		return 0, false
	}
	current := now.Unix() / int64(totpPeriod/time.Second)
	var found int64
	ok := false
	for step := current - totpSkew; step <= current+totpSkew; step++ {
		want, err := hotp.GenerateCodeCustom(secret, uint64(step), hotp.ValidateOpts{Digits: totpDigits, Algorithm: otp.AlgorithmSHA1})
		if err != nil {
			return 0, false
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			found, ok = step, true
		}
	}
	return found, ok
}

// normalizeCode is a code as typed, without the spaces and dashes that
// apps show inside it.
func normalizeCode(code string) string {
	out := make([]byte, 0, codeSize)
	for i := 0; i < len(code); i++ {
		switch c := code[i]; {
		case c == ' ' || c == '-':
		case c >= '0' && c <= '9' && len(out) <= codeSize:
			out = append(out, c)
		default:
			return "" // not a code, or too long to be one
		}
	}
	return string(out)
}

// useStep records that a code of step was accepted for the account, and
// fails with errCodeUsed when a code of this step or a later one was
// accepted before.
func (a *Admins) useStep(ctx context.Context, tenant, user string, step int64) error {
	k := totpStepKey(tenant, user)
	for {
		resp, err := a.cli.Get(ctx, k)
		if err != nil {
			return fmt.Errorf("portal: read the last code's step: %w", err)
		}
		var rev int64
		if len(resp.Kvs) == 1 {
			last, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
			if err == nil && last >= step {
				return errCodeUsed
			}
			rev = resp.Kvs[0].ModRevision
		}
		txn, err := a.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(k), "=", rev)).
			Then(clientv3.OpPut(k, strconv.FormatInt(step, 10))).
			Commit()
		if err != nil {
			return fmt.Errorf("portal: record the code's step: %w", err)
		}
		if txn.Succeeded {
			return nil
		}
		// Another sign-in recorded a step meanwhile: compare again.
	}
}
