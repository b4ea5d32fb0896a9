package portal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tollgate-dev/tollgate/internal/ids"
)

// adminPrefix holds administrator accounts:
// /tollgate/portal/admins/<tenant_id>/<user> → adminRecord (JSON).
const adminPrefix = "/tollgate/portal/admins/"

var (
	// ErrAdminExists is an account that is already there.
	ErrAdminExists = errors.New("portal: administrator already exists")
	// ErrInvalid is an account name or password that breaks the rules.
	ErrInvalid = errors.New("portal: invalid argument")
	// ErrNoAdmin is an account that is not there.
	ErrNoAdmin = errors.New("no such administrator")
	// ErrAccountChanged is an account changed since it was read.
	ErrAccountChanged = errors.New("the account changed meanwhile")
)

// userRe is an administrator's user name: what a person types, with no
// character that needs escaping in a key path or a page.
var userRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._@-]{0,63}$`)

// ValidUser reports whether u can name an administrator.
func ValidUser(u string) bool { return userRe.MatchString(u) }

// adminRecord is an account as stored. The password is kept only as its
// argon2id hash.
type adminRecord struct {
	Tenant       string    `json:"tenant_id"`
	User         string    `json:"user"`
	PasswordHash string    `json:"password_hash"`
	CreateTime   time.Time `json:"create_time"`
	// TOTPSecret is the base32 secret of the account's two-step sign-in
	// (totp.go); empty when it is off.
	TOTPSecret string `json:"totp_secret,omitempty"`
}

// Admins keeps tenant administrators' accounts in etcd.
type Admins struct {
	cli *clientv3.Client
	now func() time.Time
}

// NewAdmins returns the accounts kept in cli's etcd; now stamps creation
// (nil: time.Now).
func NewAdmins(cli *clientv3.Client, now func() time.Time) *Admins {
	if now == nil {
		now = time.Now
	}
	return &Admins{cli: cli, now: now}
}

func adminKey(tenant, user string) string { return adminPrefix + tenant + "/" + user }

// Create adds an administrator of tenant. An account of the same tenant
// and user is ErrAdminExists; it is never overwritten.
func (a *Admins) Create(ctx context.Context, tenant, user, password string) error {
	switch {
	case !ids.ValidTenant(tenant):
		return fmt.Errorf("portal: tenant id %q: %w", tenant, ErrInvalid)
	case !ValidUser(user):
		return fmt.Errorf("portal: user %q (lower-case letters, digits and . _ @ -, up to 64): %w", user, ErrInvalid)
	case len(password) < MinPasswordLen || len(password) > MaxPasswordLen:
		return fmt.Errorf("portal: a password has %d to %d bytes: %w", MinPasswordLen, MaxPasswordLen, ErrInvalid)
	}
	rec := adminRecord{Tenant: tenant, User: user, PasswordHash: hashPassword(password), CreateTime: a.now().UTC()}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	k := adminKey(tenant, user)
	resp, err := a.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(b))).
		Commit()
	if err != nil {
		return fmt.Errorf("portal: create administrator %s of %s: %w", user, tenant, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("portal: %s of tenant %s: %w", user, tenant, ErrAdminExists)
	}
	return nil
}

// Exists reports whether tenant has an administrator named user.
func (a *Admins) Exists(ctx context.Context, tenant, user string) (bool, error) {
	if !ids.ValidTenant(tenant) || !ValidUser(user) {
		return false, nil
	}
	resp, err := a.cli.Get(ctx, adminKey(tenant, user), clientv3.WithCountOnly())
	if err != nil {
		return false, fmt.Errorf("portal: read administrator: %w", err)
	}
	return resp.Count > 0, nil
}

// Verify reports whether password is the password of tenant's
// administrator user, and the revision of the account it checked (which a
// session keeps: any later change of the account ends the session). An
// unknown account costs as much as a wrong password and is reported the
// same way (false, nil).
func (a *Admins) Verify(ctx context.Context, tenant, user, password string) (ok bool, rev int64, err error) {
	_, rev, ok, err = a.verify(ctx, tenant, user, password)
	return ok, rev, err
}

// verify checks password against tenant's administrator user, and
// returns the account and its revision when it exists.
func (a *Admins) verify(ctx context.Context, tenant, user, password string) (rec *adminRecord, rev int64, ok bool, err error) {
	if len(password) > MaxPasswordLen {
		return nil, 0, false, nil
	}
	if ids.ValidTenant(tenant) && ValidUser(user) {
		rec, rev, err = a.get(ctx, tenant, user)
		if err != nil && !errors.Is(err, ErrNoAdmin) {
			return nil, 0, false, err
		}
	}
	if rec == nil {
		_, _ = checkPassword(dummyHash(), password)
		return nil, 0, false, nil
	}
	ok, err = checkPassword(rec.PasswordHash, password)
	if err != nil {
		return nil, 0, false, fmt.Errorf("portal: administrator %s of %s: %w", user, tenant, err)
	}
	return rec, rev, ok, nil
}

// SignInResult is what a sign-in's check found.
type SignInResult int

const (
	// SignInFailed: no such account, or a wrong password.
	SignInFailed SignInResult = iota
	// SignInWrongCode: the right password, but the account has two-step
	// sign-in and the code is wrong or missing. Whoever sent it may hold
	// the password.
	SignInWrongCode
	// SignInCodeUsed: the right password and a right code, but one whose
	// time step was accepted before (a replay).
	SignInCodeUsed
	// SignInOK: the right password, and the right code if one is needed.
	SignInOK
)

// SignIn checks password and, when the account has two-step sign-in, the
// code at now, which it then records as used. rev is the account's
// revision, for the session.
func (a *Admins) SignIn(ctx context.Context, tenant, user, password, code string, now time.Time) (result SignInResult, rev int64, err error) {
	rec, rev, ok, err := a.verify(ctx, tenant, user, password)
	if err != nil || !ok {
		return SignInFailed, 0, err
	}
	if rec.TOTPSecret == "" {
		return SignInOK, rev, nil
	}
	switch err := a.useCode(ctx, rec, code, now); {
	case errors.Is(err, errWrongCode):
		return SignInWrongCode, 0, nil
	case errors.Is(err, errCodeUsed):
		return SignInCodeUsed, 0, nil
	case err != nil:
		return SignInFailed, 0, err
	}
	return SignInOK, rev, nil
}

// CheckCode checks a two-step code of tenant's administrator user at
// now, and records it as used: errWrongCode, errCodeUsed, or
// errNoTwoStep when the account has no two-step sign-in.
func (a *Admins) CheckCode(ctx context.Context, tenant, user, code string, now time.Time) error {
	if !ids.ValidTenant(tenant) || !ValidUser(user) {
		return fmt.Errorf("portal: %s of tenant %s: %w", user, tenant, ErrNoAdmin)
	}
	rec, _, err := a.get(ctx, tenant, user)
	if err != nil {
		return err
	}
	if rec.TOTPSecret == "" {
		return errNoTwoStep
	}
	return a.useCode(ctx, rec, code, now)
}

// useCode checks code against rec's two-step secret at now and records
// its time step as used.
func (a *Admins) useCode(ctx context.Context, rec *adminRecord, code string, now time.Time) error {
	step, ok := codeStep(rec.TOTPSecret, normalizeCode(code), now)
	if !ok {
		return errWrongCode
	}
	return a.useStep(ctx, rec.Tenant, rec.User, step)
}

// get reads an account and its mod revision; ErrNoAdmin when there is
// none.
func (a *Admins) get(ctx context.Context, tenant, user string) (*adminRecord, int64, error) {
	resp, err := a.cli.Get(ctx, adminKey(tenant, user))
	if err != nil {
		return nil, 0, fmt.Errorf("portal: read administrator: %w", err)
	}
	if len(resp.Kvs) != 1 {
		return nil, 0, fmt.Errorf("portal: %s of tenant %s: %w", user, tenant, ErrNoAdmin)
	}
	var rec adminRecord
	if err := json.Unmarshal(resp.Kvs[0].Value, &rec); err != nil {
		return nil, 0, fmt.Errorf("portal: administrator %s of %s: %w", user, tenant, err)
	}
	return &rec, resp.Kvs[0].ModRevision, nil
}

// SetPassword replaces the password of tenant's administrator user, and
// returns the account's new revision; every session of the account ends.
// With expectRev above 0 the account must still be at that revision
// (ErrAccountChanged otherwise): a change by its own session must not
// undo an operator's reset made meanwhile. ErrNoAdmin when there is no
// such account.
func (a *Admins) SetPassword(ctx context.Context, tenant, user, password string, expectRev int64) (int64, error) {
	if len(password) < MinPasswordLen || len(password) > MaxPasswordLen {
		if !ids.ValidTenant(tenant) || !ValidUser(user) {
			return 0, fmt.Errorf("portal: %s of tenant %s: %w", user, tenant, ErrNoAdmin)
		}
		return 0, fmt.Errorf("portal: a password has %d to %d bytes: %w", MinPasswordLen, MaxPasswordLen, ErrInvalid)
	}
	hash := hashPassword(password)
	return a.update(ctx, tenant, user, expectRev, "set the password", func(rec *adminRecord) { rec.PasswordHash = hash })
}

// SetTOTP turns two-step sign-in on with secret (base32), or off when
// secret is empty, and returns the account's new revision; every session
// of the account ends. expectRev and the errors are SetPassword's.
func (a *Admins) SetTOTP(ctx context.Context, tenant, user, secret string, expectRev int64) (int64, error) {
	return a.update(ctx, tenant, user, expectRev, "set two-step sign-in", func(rec *adminRecord) { rec.TOTPSecret = secret })
}

// update applies change to tenant's administrator user, over the account
// at expectRev when it is above 0, and returns the new revision.
func (a *Admins) update(ctx context.Context, tenant, user string, expectRev int64, what string, change func(*adminRecord)) (int64, error) {
	if !ids.ValidTenant(tenant) || !ValidUser(user) {
		return 0, fmt.Errorf("portal: %s of tenant %s: %w", user, tenant, ErrNoAdmin)
	}
	for {
		rec, rev, err := a.get(ctx, tenant, user)
		if err != nil {
			return 0, err
		}
		if expectRev > 0 && rev != expectRev {
			return 0, fmt.Errorf("portal: %s of tenant %s: %w", user, tenant, ErrAccountChanged)
		}
		change(rec)
		b, err := json.Marshal(rec)
		if err != nil {
			return 0, err
		}
		k := adminKey(tenant, user)
		resp, err := a.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(k), "=", rev)).
			Then(clientv3.OpPut(k, string(b))).
			Commit()
		if err != nil {
			return 0, fmt.Errorf("portal: %s of %s of %s: %w", what, user, tenant, err)
		}
		if resp.Succeeded {
			return resp.Header.Revision, nil
		}
		// Changed since it was read: read it again (and, with
		// expectRev, refuse).
	}
}

// Remove deletes tenant's administrator user; its sessions end.
// ErrNoAdmin when there is no such account.
func (a *Admins) Remove(ctx context.Context, tenant, user string) error {
	if !ids.ValidTenant(tenant) || !ValidUser(user) {
		return fmt.Errorf("portal: %s of tenant %s: %w", user, tenant, ErrNoAdmin)
	}
	resp, err := a.cli.Txn(ctx).Then(
		clientv3.OpDelete(adminKey(tenant, user)),
		clientv3.OpDelete(totpStepKey(tenant, user)),
	).Commit()
	if err != nil {
		return fmt.Errorf("portal: remove administrator %s of %s: %w", user, tenant, err)
	}
	if resp.Responses[0].GetResponseDeleteRange().GetDeleted() == 0 {
		return fmt.Errorf("portal: %s of tenant %s: %w", user, tenant, ErrNoAdmin)
	}
	return nil
}

// Admin is an account as listed: never its password hash or two-step
// secret.
type Admin struct {
	Tenant, User string
	CreateTime   time.Time
	// TwoStep is whether the account has two-step sign-in.
	TwoStep bool
}

// maxListed bounds one List.
const maxListed = 10_000

// List returns tenant's administrators ordered by user name (at most
// 10,000), or every tenant's when tenant is empty.
func (a *Admins) List(ctx context.Context, tenant string) ([]Admin, error) {
	prefix := adminPrefix
	if tenant != "" {
		if !ids.ValidTenant(tenant) {
			return nil, nil
		}
		prefix += tenant + "/"
	}
	resp, err := a.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithLimit(maxListed),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("portal: list administrators: %w", err)
	}
	out := make([]Admin, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var rec adminRecord
		if err := json.Unmarshal(kv.Value, &rec); err != nil {
			return nil, fmt.Errorf("portal: administrator %s: %w", kv.Key, err)
		}
		out = append(out, Admin{Tenant: rec.Tenant, User: rec.User, CreateTime: rec.CreateTime, TwoStep: rec.TOTPSecret != ""})
	}
	return out, nil
}
