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

// DefaultSessionTTL is how long a session lasts after sign-in at most,
// and DefaultSessionIdle how long it lasts without a page.
const (
	DefaultSessionTTL  = 8 * time.Hour
	DefaultSessionIdle = 30 * time.Minute
)

// seenEvery is how stale a session's last-seen time may get before a page
// writes it again: at most one etcd write a minute per session.
const seenEvery = time.Minute

// errNoSession is a token that names no live session.
var errNoSession = errors.New("portal: no such session")

// session is a signed-in administrator.
type session struct {
	Tenant string `json:"tenant_id"`
	User   string `json:"user"`
	// CSRF is the token every form of the session must carry.
	CSRF       string    `json:"csrf"`
	CreateTime time.Time `json:"create_time"`
	LastSeen   time.Time `json:"last_seen"`
	// AdminRev is the account's revision when the session began (or
	// the session changed its password): any other change of the account
	// (a new password, its removal) ends the session.
	AdminRev int64 `json:"admin_rev"`
	// PendingTOTP is the otpauth:// link of a two-step secret being set
	// up, shown to this session only, until a code from it turns two-step
	// sign-in on.
	PendingTOTP string `json:"pending_totp,omitempty"`
	// twoStep is whether the account has two-step sign-in, as read with
	// the session.
	twoStep bool
	lease   clientv3.LeaseID
	key     string
	// rev is the session's etcd revision as read or last written: a
	// write over a session another page changed meanwhile is refused.
	rev int64
}

// Sessions keeps sessions in etcd, so that every gateway serving the
// portal knows them and a restart signs nobody out.
type Sessions struct {
	cli       *clientv3.Client
	ttl, idle time.Duration
	now       func() time.Time
}

// NewSessions returns sessions kept in cli's etcd, each lasting ttl from
// sign-in and idle without a page (0: DefaultSessionTTL,
// DefaultSessionIdle).
func NewSessions(cli *clientv3.Client, ttl, idle time.Duration, now func() time.Time) *Sessions {
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	if idle <= 0 {
		idle = DefaultSessionIdle
	}
	if now == nil {
		now = time.Now
	}
	return &Sessions{cli: cli, ttl: ttl, idle: idle, now: now}
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

// Start begins a session of tenant's administrator user, whose account
// was read at adminRev, and returns its token.
func (s *Sessions) Start(ctx context.Context, tenant, user string, adminRev int64) (string, *session, error) {
	lease, err := s.cli.Grant(ctx, int64(s.ttl/time.Second))
	if err != nil {
		return "", nil, fmt.Errorf("portal: session lease: %w", err)
	}
	now := s.now().UTC()
	token := randomToken()
	sess := &session{Tenant: tenant, User: user, CSRF: randomToken(), CreateTime: now, LastSeen: now, AdminRev: adminRev,
		lease: lease.ID, key: sessionKey(token)}
	if err := s.put(ctx, sess); err != nil {
		return "", nil, err
	}
	return token, sess, nil
}

// SetPendingTOTP keeps link as the session's two-step secret being set
// up, unless another page of the session (a second tab) set one up
// meanwhile: that one is kept, and sess takes it, so that every page
// shows the secret the session holds.
func (s *Sessions) SetPendingTOTP(ctx context.Context, sess *session, link string) error {
	for {
		sess.PendingTOTP = link
		ok, err := s.update(ctx, sess)
		if err != nil || ok {
			return err
		}
		resp, err := s.cli.Get(ctx, sess.key)
		if err != nil {
			return fmt.Errorf("portal: read session: %w", err)
		}
		if len(resp.Kvs) != 1 {
			return errNoSession
		}
		var cur session
		if err := json.Unmarshal(resp.Kvs[0].Value, &cur); err != nil {
			return fmt.Errorf("portal: session: %w", err)
		}
		cur.twoStep, cur.lease, cur.key, cur.rev = sess.twoStep, sess.lease, sess.key, resp.Kvs[0].ModRevision
		*sess = cur
		if cur.PendingTOTP != "" {
			return nil
		}
	}
}

// TwoStep reports whether the session's account has two-step sign-in,
// as read with the session (for the pages).
func (sess *session) TwoStep() bool { return sess.twoStep }

func (s *Sessions) put(ctx context.Context, sess *session) error {
	b, err := json.Marshal(sess)
	if err != nil {
		return err
	}
	resp, err := s.cli.Put(ctx, sess.key, string(b), clientv3.WithLease(sess.lease))
	if err != nil {
		return fmt.Errorf("portal: store session: %w", err)
	}
	sess.rev = resp.Header.Revision
	return nil
}

// update writes sess over the session as it was read (sess.rev); false
// when another page of the session changed it meanwhile.
func (s *Sessions) update(ctx context.Context, sess *session) (bool, error) {
	b, err := json.Marshal(sess)
	if err != nil {
		return false, err
	}
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(sess.key), "=", sess.rev)).
		Then(clientv3.OpPut(sess.key, string(b), clientv3.WithLease(sess.lease))).
		Commit()
	if err != nil {
		return false, fmt.Errorf("portal: store session: %w", err)
	}
	if resp.Succeeded {
		sess.rev = resp.Header.Revision
	}
	return resp.Succeeded, nil
}

// Get returns the live session of token, or errNoSession: none, past its
// lifetime or idle time, or its account changed or removed since.
func (s *Sessions) Get(ctx context.Context, token string) (*session, error) {
	if len(token) != 43 {
		return nil, errNoSession
	}
	key := sessionKey(token)
	resp, err := s.cli.Get(ctx, key)
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
	sess.lease, sess.key, sess.rev = clientv3.LeaseID(resp.Kvs[0].Lease), key, resp.Kvs[0].ModRevision
	now := s.now()
	// The lease bounds the lifetime too; this also holds a session to a
	// TTL lowered since it began.
	if now.Sub(sess.CreateTime) >= s.ttl || now.Sub(sess.LastSeen) >= s.idle {
		return nil, s.endStale(ctx, &sess)
	}
	admin, err := s.cli.Get(ctx, adminKey(sess.Tenant, sess.User))
	if err != nil {
		return nil, fmt.Errorf("portal: read administrator: %w", err)
	}
	if len(admin.Kvs) != 1 || admin.Kvs[0].ModRevision != sess.AdminRev {
		return nil, s.endStale(ctx, &sess)
	}
	var rec adminRecord
	if err := json.Unmarshal(admin.Kvs[0].Value, &rec); err != nil {
		return nil, fmt.Errorf("portal: administrator %s of %s: %w", sess.User, sess.Tenant, err)
	}
	sess.twoStep = rec.TOTPSecret != ""
	if now.Sub(sess.LastSeen) >= seenEvery {
		sess.LastSeen = now.UTC()
		// Written over the session as read, never over a change another
		// page made meanwhile (a secret being set up); that page's write
		// has marked the session seen too.
		if _, err := s.update(ctx, &sess); err != nil {
			return nil, err
		}
	}
	return &sess, nil
}

// endStale ends a session found over; the answer is errNoSession whether
// or not that worked (the lease ends it anyway).
func (s *Sessions) endStale(ctx context.Context, sess *session) error {
	_ = s.End(ctx, sess)
	return errNoSession
}

// End ends a session: its lease is revoked, which deletes it.
func (s *Sessions) End(ctx context.Context, sess *session) error {
	if _, err := s.cli.Revoke(ctx, sess.lease); err != nil {
		return fmt.Errorf("portal: end session: %w", err)
	}
	return nil
}
