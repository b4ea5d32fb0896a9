package portal

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// sessionPrefix holds signed-in sessions:
// /tollgate/portal/sessions/<hex SHA-256 of the token> → session (JSON),
// attached to a lease of the session's lifetime, so that etcd ends it
// even if nobody signs out. The token itself is only in the browser's
// cookie.
const sessionPrefix = "/tollgate/portal/sessions/"

// DefaultSessionTTL is how long a session lasts after sign-in, whatever
// is done with it.
const DefaultSessionTTL = 8 * time.Hour

// errNoSession is a token that names no live session.
var errNoSession = errors.New("portal: no such session")

// session is a signed-in administrator.
type session struct {
	Tenant string `json:"tenant_id"`
	User   string `json:"user"`
	// CSRF is the token every form of the session must carry.
	CSRF       string    `json:"csrf"`
	CreateTime time.Time `json:"create_time"`
	lease      clientv3.LeaseID
}

// Sessions keeps sessions in etcd, so that every gateway serving the
// portal knows them and a restart signs nobody out.
type Sessions struct {
	cli *clientv3.Client
	ttl time.Duration
	now func() time.Time
}

// NewSessions returns sessions kept in cli's etcd, each lasting ttl
// (0: DefaultSessionTTL).
func NewSessions(cli *clientv3.Client, ttl time.Duration, now func() time.Time) *Sessions {
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Sessions{cli: cli, ttl: ttl, now: now}
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func sessionKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return sessionPrefix + hex.EncodeToString(sum[:])
}

// Start begins a session of tenant's administrator user and returns its
// token.
func (s *Sessions) Start(ctx context.Context, tenant, user string) (string, *session, error) {
	lease, err := s.cli.Grant(ctx, int64(s.ttl/time.Second))
	if err != nil {
		return "", nil, fmt.Errorf("portal: session lease: %w", err)
	}
	sess := &session{Tenant: tenant, User: user, CSRF: randomToken(), CreateTime: s.now().UTC(), lease: lease.ID}
	b, err := json.Marshal(sess)
	if err != nil {
		return "", nil, err
	}
	token := randomToken()
	if _, err := s.cli.Put(ctx, sessionKey(token), string(b), clientv3.WithLease(lease.ID)); err != nil {
		return "", nil, fmt.Errorf("portal: store session: %w", err)
	}
	return token, sess, nil
}

// Get returns the live session of token, or errNoSession.
func (s *Sessions) Get(ctx context.Context, token string) (*session, error) {
	if len(token) != 43 {
		return nil, errNoSession
	}
	resp, err := s.cli.Get(ctx, sessionKey(token))
	if err != nil {
		return nil, fmt.Errorf("portal: read session: %w", err)
	}
	if len(resp.Kvs) != 1 {
		return nil, errNoSession
	}
	var sess session
	if err := json.Unmarshal(resp.Kvs[0].Value, &sess); err != nil {
		return nil, fmt.Errorf("portal: session: %w", err)
	}
	sess.lease = clientv3.LeaseID(resp.Kvs[0].Lease)
	// The lease is the lifetime; this only guards against a lease that
	// outlived it (a clock or TTL change).
	if s.now().Sub(sess.CreateTime) >= s.ttl {
		return nil, errNoSession
	}
	return &sess, nil
}

// End ends the session of token: its lease is revoked, which deletes it.
func (s *Sessions) End(ctx context.Context, sess *session) error {
	if _, err := s.cli.Revoke(ctx, sess.lease); err != nil {
		return fmt.Errorf("portal: end session: %w", err)
	}
	return nil
}
