package edge_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// changingAuth is an Authenticator whose key can change between two
// lookups, as the gateway's key cache does when the key watch delivers a
// revocation or new limits. Each lookup is announced on lookups.
type changingAuth struct {
	mu        sync.Mutex
	secret    string
	principal *keys.Principal
	lookups   chan struct{}
}

func (a *changingAuth) Authenticate(secret string) (*keys.Principal, error) {
	a.mu.Lock()
	p := a.principal
	a.mu.Unlock()
	// Announced once the key is read, so that a change the test makes
	// next is seen only by a later lookup.
	select {
	case a.lookups <- struct{}{}:
	default:
	}
	if secret != a.secret || p == nil {
		return nil, keys.ErrUnauthorized
	}
	return p, nil
}

func (a *changingAuth) set(p *keys.Principal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.principal = p
}

// A request is served under its key as it is once the body is in, not as
// it was when the headers came: a body may take up to BodyReadTimeout,
// and a key revoked, or given lower limits, meanwhile must not be served
// under its old settings.
func TestKeyChangedWhileBodyIsSent(t *testing.T) {
	const secret = "tgk_test_changing"
	key := func(rpm int64) *keys.Principal {
		return keys.NewPrincipal("ten_test", "key_changing", "changing", true, nil, rpm, 0, nil, time.Time{})
	}
	body := `{"model":"builtin/echo","messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name string
		// used is how many requests the key has had this minute, under
		// its first setting.
		used   int
		then   *keys.Principal
		status int
		code   string
		typ    string
	}{
		{"revoked", 0, nil, http.StatusUnauthorized, "unauthorized", "authentication_error"},
		{"limit lowered below what the minute used", 5, key(3), http.StatusTooManyRequests, "rate_limited", "rate_limit_error"},
		{"unchanged", 5, key(100), http.StatusOK, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			auth := &changingAuth{secret: secret, principal: key(100), lookups: make(chan struct{}, 1)}
			audit := newAuditRecorder()
			s := newStack(t, stackConfig{auth: auth, audit: audit, limits: startLimits(t)})
			for range tc.used {
				if r := s.post(t, chatPath, secret, body); r.status != http.StatusOK {
					t.Fatalf("a request of the minute: %d %s", r.status, r.body)
				}
				audit.next(t)
			}
			select {
			case <-auth.lookups: // the last request's
			default:
			}
			conn := s.sendRaw(t, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s",
				chatPath, s.host(), secret, len(body), body[:10]))
			<-auth.lookups // the headers'
			auth.set(tc.then)
			if _, err := conn.Write([]byte(body[10:])); err != nil {
				t.Fatal(err)
			}
			r := readRaw(t, conn, "after the body")
			if tc.status == http.StatusOK {
				if r.status != http.StatusOK {
					t.Fatalf("status %d: %s", r.status, r.body)
				}
			} else {
				wantError(t, r, tc.status, tc.code, tc.typ, "")
			}
			if ev := audit.next(t); ev.Status != tc.status || ev.KeyID != "key_changing" {
				t.Errorf("audit event: status %d key %q", ev.Status, ev.KeyID)
			}
		})
	}
}
