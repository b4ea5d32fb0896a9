package keys

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	keysv1 "github.com/tollgate-dev/tollgate/gen/tollgate/keys/v1"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// Store reads and writes key records in etcd. Every write is a transaction
// guarded by the mod revision it read, so concurrent writers never lose each
// other's updates. It is safe for concurrent use.
type Store struct {
	cli *clientv3.Client
	now func() time.Time
}

// NewStore returns a Store over cli; now stamps create and revoke times (nil
// means time.Now).
func NewStore(cli *clientv3.Client, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{cli: cli, now: now}
}

// Create mints a key for spec and returns it with its secret, which is not
// stored and cannot be recovered. A label already used in the tenant is
// ErrAlreadyExists; a spec that breaks the rules is ErrInvalid.
func (s *Store) Create(ctx context.Context, spec Spec) (*keysv1.Key, string, error) {
	if err := spec.Validate(); err != nil {
		return nil, "", fmt.Errorf("keys: create: %w", err)
	}
	secret := newSecret()
	r := newRecord(&spec, newKeyID(), secret, s.now())
	ok, err := s.insert(ctx, r, 0)
	if err != nil {
		return nil, "", fmt.Errorf("keys: create %q in tenant %s: %w", spec.Label, spec.TenantID, err)
	}
	if !ok {
		return nil, "", fmt.Errorf("keys: create: tenant %s already has a key labelled %q: %w", spec.TenantID, spec.Label, ErrAlreadyExists)
	}
	return r.proto(), secret, nil
}

// Get returns a tenant's key. ErrNotFound when there is no such key.
func (s *Store) Get(ctx context.Context, tenantID, keyID string) (*keysv1.Key, error) {
	r, _, err := s.getRecord(ctx, tenantID, keyID)
	if err != nil {
		return nil, err
	}
	return r.proto(), nil
}

// FindByLabel returns the tenant's key with label. ErrNotFound when there is
// none.
func (s *Store) FindByLabel(ctx context.Context, tenantID, label string) (*keysv1.Key, error) {
	keyID, _, err := s.labelOwner(ctx, tenantID, label)
	if err != nil {
		return nil, err
	}
	if keyID == "" {
		return nil, fmt.Errorf("keys: tenant %s has no key labelled %q: %w", tenantID, label, ErrNotFound)
	}
	return s.Get(ctx, tenantID, keyID)
}

// Revoke revokes a key and returns it. Revoking a revoked key changes
// nothing: the first revoke time stays. ErrNotFound when there is no such
// key.
func (s *Store) Revoke(ctx context.Context, tenantID, keyID string) (*keysv1.Key, error) {
	for {
		r, rev, err := s.getRecord(ctx, tenantID, keyID)
		if err != nil {
			return nil, err
		}
		if r.revoked() {
			return r.proto(), nil
		}
		r.RevokeTime = s.now().UTC()
		ok, err := s.replace(ctx, r, rev)
		if err != nil {
			return nil, fmt.Errorf("keys: revoke %s/%s: %w", tenantID, keyID, err)
		}
		if ok {
			return r.proto(), nil
		}
		// Someone else wrote the record since it was read: read it again.
	}
}

// getRecord reads a record and the mod revision it was read at.
func (s *Store) getRecord(ctx context.Context, tenantID, keyID string) (*record, int64, error) {
	if !ids.ValidTenant(tenantID) || !ids.ValidKey(keyID) {
		// No record can have such a name; do not build an etcd key of it.
		return nil, 0, fmt.Errorf("keys: key %s/%s: %w", tenantID, keyID, ErrNotFound)
	}
	resp, err := s.cli.Get(ctx, recordKey(tenantID, keyID))
	if err != nil {
		return nil, 0, fmt.Errorf("keys: get %s/%s: %w", tenantID, keyID, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, fmt.Errorf("keys: key %s/%s: %w", tenantID, keyID, ErrNotFound)
	}
	kv := resp.Kvs[0]
	r, err := decodeRecord(kv.Value)
	if err != nil {
		return nil, 0, fmt.Errorf("keys: %s: %w", kv.Key, err)
	}
	return r, kv.ModRevision, nil
}

// labelOwner returns the key id the label index names for label ("" when
// none) and the index entry's mod revision (0 when absent).
func (s *Store) labelOwner(ctx context.Context, tenantID, label string) (string, int64, error) {
	if !ids.ValidTenant(tenantID) {
		return "", 0, nil
	}
	resp, err := s.cli.Get(ctx, labelKey(tenantID, label))
	if err != nil {
		return "", 0, fmt.Errorf("keys: find label %q in tenant %s: %w", label, tenantID, err)
	}
	if len(resp.Kvs) == 0 {
		return "", 0, nil
	}
	return string(resp.Kvs[0].Value), resp.Kvs[0].ModRevision, nil
}

// insert writes a new record and points its label at it, provided the label
// index entry is still at labelRev (0: absent) and the record does not
// exist. false means the condition failed and nothing was written.
func (s *Store) insert(ctx context.Context, r *record, labelRev int64) (bool, error) {
	lk, rk := labelKey(r.TenantID, r.Label), recordKey(r.TenantID, r.KeyID)
	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(lk), "=", labelRev),
		clientv3.Compare(clientv3.CreateRevision(rk), "=", 0),
	).Then(
		clientv3.OpPut(lk, r.KeyID),
		clientv3.OpPut(rk, r.encode()),
	).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// replace overwrites a record provided it is still at rev. false means it
// was changed (or deleted) meanwhile and nothing was written.
func (s *Store) replace(ctx context.Context, r *record, rev int64, also ...clientv3.Cmp) (bool, error) {
	rk := recordKey(r.TenantID, r.KeyID)
	cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(rk), "=", rev)}, also...)
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(clientv3.OpPut(rk, r.encode())).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}
