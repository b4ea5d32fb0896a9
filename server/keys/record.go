package keys

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	keysv1 "github.com/tollgate-dev/tollgate/gen/tollgate/keys/v1"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// Key prefixes of the etcd layout (see the package documentation).
const (
	recordPrefix = "/tollgate/keys/"
	labelPrefix  = "/tollgate/key-labels/"
)

// recordKey is the etcd key of a record.
func recordKey(tenantID, keyID string) string { return tenantPrefix(tenantID) + keyID }

// tenantPrefix is the etcd prefix of a tenant's records.
func tenantPrefix(tenantID string) string { return recordPrefix + tenantID + "/" }

// labelKey is the etcd key of a label index entry. The label is used as is:
// entries are only ever read whole, never listed by label prefix.
func labelKey(tenantID, label string) string { return labelPrefix + tenantID + "/" + label }

// record is the JSON form of a key in etcd. Times are RFC 3339 in UTC; an
// unset expire or revoke time is left out.
type record struct {
	TenantID  string   `json:"tenant_id"`
	KeyID     string   `json:"key_id"`
	Label     string   `json:"label"`
	AllModels bool     `json:"all_models"`
	Models    []string `json:"models,omitempty"`
	RPM       int64    `json:"rpm"`
	TPD       int64    `json:"tpd"`
	// MaxOutput is the key's maximum completion tokens a reply; 0 none.
	// Left out when 0, so records written before it existed read the same.
	MaxOutput    int64     `json:"max_output_tokens,omitempty"`
	Scopes       []string  `json:"scopes,omitempty"`
	SecretSHA256 string    `json:"secret_sha256"`
	SecretHint   string    `json:"secret_hint"`
	CreateTime   time.Time `json:"create_time"`
	ExpireTime   time.Time `json:"expire_time,omitzero"`
	RevokeTime   time.Time `json:"revoke_time,omitzero"`
}

// newRecord is a fresh record of spec for secret, created at now.
func newRecord(spec *Spec, keyID, secret string, now time.Time) *record {
	r := &record{TenantID: spec.TenantID, KeyID: keyID, Label: spec.Label, CreateTime: now.UTC()}
	r.setSpec(spec)
	r.setSecret(secret)
	return r
}

// setSpec brings the settings of r in line with spec; identity, secret and
// times other than expiry are left alone.
func (r *record) setSpec(spec *Spec) {
	r.AllModels = spec.AllModels
	r.Models = slices.Clone(spec.Models)
	r.RPM, r.TPD, r.MaxOutput = spec.RPM, spec.TPD, spec.MaxOutputTokens
	r.Scopes = slices.Clone(spec.Scopes)
	r.ExpireTime = time.Time{}
	if !spec.ExpireTime.IsZero() {
		r.ExpireTime = spec.ExpireTime.UTC()
	}
}

// setSecret stores the hash and hint of secret.
func (r *record) setSecret(secret string) {
	h := HashSecret(secret)
	r.SecretSHA256 = hex.EncodeToString(h[:])
	r.SecretHint = secretHint(secret)
}

func (r *record) revoked() bool { return !r.RevokeTime.IsZero() }

// encode returns the JSON stored in etcd.
func (r *record) encode() string {
	b, err := json.Marshal(r)
	if err != nil { // cannot happen: every field marshals
		panic(fmt.Sprintf("keys: encode record: %v", err))
	}
	return string(b)
}

// decodeRecord parses a stored record and checks the names the layout
// depends on. (The secret hash is checked where it is used, by newEntry.)
func decodeRecord(b []byte) (*record, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode key record: %w", err)
	}
	if !ids.ValidTenant(r.TenantID) || !ids.ValidKey(r.KeyID) {
		return nil, fmt.Errorf("decode key record: bad tenant id %q or key id %q", r.TenantID, r.KeyID)
	}
	return &r, nil
}

// secretHash decodes SecretSHA256.
func (r *record) secretHash() ([sha256.Size]byte, error) {
	var h [sha256.Size]byte
	if len(r.SecretSHA256) != hex.EncodedLen(len(h)) {
		return h, fmt.Errorf("decode key record %s/%s: secret_sha256 is not 64 hex digits", r.TenantID, r.KeyID)
	}
	if _, err := hex.Decode(h[:], []byte(r.SecretSHA256)); err != nil {
		return h, fmt.Errorf("decode key record %s/%s: secret_sha256 is not 64 hex digits", r.TenantID, r.KeyID)
	}
	return h, nil
}

// proto returns r as the API's Key.
func (r *record) proto() *keysv1.Key {
	k := &keysv1.Key{
		TenantId:        r.TenantID,
		KeyId:           r.KeyID,
		Label:           r.Label,
		AllModels:       r.AllModels,
		Models:          slices.Clone(r.Models),
		Rpm:             r.RPM,
		Tpd:             r.TPD,
		Scopes:          slices.Clone(r.Scopes),
		CreateTime:      timestamppb.New(r.CreateTime),
		SecretHint:      r.SecretHint,
		MaxOutputTokens: r.MaxOutput,
	}
	if !r.ExpireTime.IsZero() {
		k.ExpireTime = timestamppb.New(r.ExpireTime)
	}
	if r.revoked() {
		k.RevokeTime = timestamppb.New(r.RevokeTime)
	}
	return k
}

// principal returns the hot-path view of r.
func (r *record) principal() *Principal {
	p := NewPrincipal(r.TenantID, r.KeyID, r.Label, r.AllModels, r.Models, r.RPM, r.TPD, r.Scopes, r.ExpireTime)
	p.MaxOutputTokens = r.MaxOutput
	return p
}
