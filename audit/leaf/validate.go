package leaf

import (
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/internal/ids"
)

// maxJSONInt is the largest integer an RFC 8785 (I-JSON) number holds exactly.
const maxJSONInt = 1<<53 - 1

// Validate reports the first field of l that is not well formed.
func (l Leaf) Validate() error {
	if l.Schema != Schema {
		return fmt.Errorf("leaf: schema %q, want %q", l.Schema, Schema)
	}
	checks := []func(string) error{ids.CheckRequest, ids.CheckTenant, ids.CheckAppliance, ids.CheckKey}
	for i, v := range []string{l.RequestID, l.TenantID, l.ApplianceID, l.KeyID} {
		if err := checks[i](v); err != nil {
			return fmt.Errorf("leaf: %w", err)
		}
	}
	if l.PolicyDecisionID != "" {
		if err := ids.CheckDecision(l.PolicyDecisionID); err != nil {
			return fmt.Errorf("leaf: %w", err)
		}
	}
	if l.Sequence < 1 || l.Sequence > maxJSONInt {
		return fmt.Errorf("leaf: sequence %d out of range [1, 2^53-1]", l.Sequence)
	}
	if _, err := ParseTime(l.Time); err != nil {
		return err
	}
	if l.Endpoint == "" {
		return errors.New("leaf: endpoint is empty")
	}
	if l.Status < 100 || l.Status > 599 {
		return fmt.Errorf("leaf: status %d is not an HTTP status", l.Status)
	}
	if l.PromptTokens < 0 || l.PromptTokens > maxJSONInt || l.CompletionTokens < 0 || l.CompletionTokens > maxJSONInt {
		return fmt.Errorf("leaf: token counts %d/%d out of range [0, 2^53-1]", l.PromptTokens, l.CompletionTokens)
	}
	if err := checkHex("request_sha256", l.RequestSHA256, 32); err != nil {
		return err
	}
	if err := checkHex("response_sha256", l.ResponseSHA256, 32); err != nil {
		return err
	}
	return checkHex("salt", l.Salt, SaltSize)
}

// checkHex reports whether s is exactly n bytes in lowercase hex: 2n
// digits of 0-9a-f, what hex.EncodeToString writes, checked in place
// since every leaf is validated as it is written.
func checkHex(field, s string, n int) error {
	ok := len(s) == 2*n
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = '0' <= c && c <= '9' || 'a' <= c && c <= 'f'
	}
	if !ok {
		return fmt.Errorf("leaf: %s must be %d bytes in lowercase hex", field, n)
	}
	return nil
}

// ParseTime parses a leaf time, accepting only the FormatTime form.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(TimeLayout, s)
	var buf [len(TimeLayout) + 8]byte // the round trip on the stack
	if err != nil || string(t.UTC().AppendFormat(buf[:0], TimeLayout)) != s {
		return time.Time{}, fmt.Errorf("leaf: time %q is not RFC 3339 UTC with microseconds (%s)", s, TimeLayout)
	}
	return t, nil
}
