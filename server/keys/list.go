package keys

import (
	"context"
	"encoding/base64"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	keysv1 "github.com/tollgate-dev/tollgate/gen/tollgate/keys/v1"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

const (
	// DefaultPageSize is the page size List uses when asked for 0.
	DefaultPageSize = 100
	// MaxPageSize bounds a page; larger requests get this many.
	MaxPageSize = 1000
)

// List returns up to pageSize of a tenant's keys ordered by key id, starting
// after the key the page token names, and the token of the next page ("" on
// the last page). A page token that List did not produce is ErrInvalid. A
// tenant without keys has an empty list.
func (s *Store) List(ctx context.Context, tenantID string, pageSize int, pageToken string) ([]*keysv1.Key, string, error) {
	switch {
	case pageSize < 0:
		return nil, "", fmt.Errorf("keys: list: page size %d: %w", pageSize, ErrInvalid)
	case pageSize == 0:
		pageSize = DefaultPageSize
	case pageSize > MaxPageSize:
		pageSize = MaxPageSize
	}
	after, err := decodePageToken(pageToken)
	if err != nil {
		return nil, "", err
	}
	if !ids.ValidTenant(tenantID) {
		return nil, "", nil
	}
	prefix := tenantPrefix(tenantID)
	start := prefix
	if after != "" {
		start = prefix + after + "\x00" // the first key after `after`
	}
	resp, err := s.cli.Get(ctx, start,
		clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)),
		clientv3.WithLimit(int64(pageSize)))
	if err != nil {
		return nil, "", fmt.Errorf("keys: list tenant %s: %w", tenantID, err)
	}
	out := make([]*keysv1.Key, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		r, err := decodeRecord(kv.Value)
		if err != nil {
			return nil, "", fmt.Errorf("keys: list tenant %s: %s: %w", tenantID, kv.Key, err)
		}
		out = append(out, r.proto())
	}
	next := ""
	if resp.More && len(out) > 0 {
		next = encodePageToken(out[len(out)-1].GetKeyId())
	}
	return out, next, nil
}

// A page token is the unpadded base64url form of the last key id of the
// previous page. It is opaque to clients; only List reads it.
func encodePageToken(lastKeyID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(lastKeyID))
}

func decodePageToken(token string) (string, error) {
	if token == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || !ids.ValidKey(string(b)) {
		return "", fmt.Errorf("keys: list: page token %q: %w", token, ErrInvalid)
	}
	return string(b), nil
}
