// Package seed reads the file `tollgate dev --seed FILE` declares tenants
// and keys with, for development and tests:
//
//	tenants:
//	  - id: acme
//	    keys:
//	      - label: ci
//	        secret: tgk_dev_acme_ci     # dev only; elsewhere secrets are generated
//	        models: ["*"]                # "*" alone, or <namespace>/<model_name> ids
//	        rpm: 600                     # 0 or absent: no limit
//	        tpd: 1000000                 # 0 or absent: no limit
//	        max_output_tokens: 4096      # 0 or absent: no maximum of the key's
//	        scopes: ["tool:get_weather"] # tool:<name> or tool:*
//	        expires_at: "2030-01-01T00:00:00Z" # optional, RFC 3339
//	        revoked: false                     # optional
//	    audit_tokens: ["tga_dev_acme_audit"]   # read the tenant's audit API on the central plane
//
// Parse rejects a file that is not YAML, names a field that does not exist,
// or breaks a rule, and every problem names its line. Apply upserts the keys
// into a keys.Store, so applying the same seed again changes nothing.
package seed

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Seed is a parsed seed file.
type Seed struct {
	Tenants []Tenant `yaml:"tenants"`
}

// Tenant declares a tenant and what belongs to it. New kinds of things
// (administrators, audit tokens) are added as further fields with their own
// types and validation.
type Tenant struct {
	ID   string `yaml:"id"`
	Keys []Key  `yaml:"keys"`
	// AuditTokens are bearer tokens that read the tenant's heads and proofs
	// on the central plane (tga_ and at least 8 more characters); dev only.
	AuditTokens []string `yaml:"audit_tokens"`

	pos pos
}

// Key declares a virtual key, matched by its label within the tenant.
type Key struct {
	Label string `yaml:"label"`
	// Secret is the key's secret: tgk_ and at least 8 more characters.
	Secret string `yaml:"secret"`
	// Models is ["*"] for every model, or a list of model ids.
	Models []string `yaml:"models"`
	RPM    int64    `yaml:"rpm"`
	TPD    int64    `yaml:"tpd"`
	// MaxOutputTokens is the most completion tokens a reply may have; 0
	// or absent, no maximum of the key's.
	MaxOutputTokens int64    `yaml:"max_output_tokens"`
	Scopes          []string `yaml:"scopes"`
	// ExpiresAt is an RFC 3339 time, or empty for a key that never expires.
	ExpiresAt string `yaml:"expires_at"`
	Revoked   bool   `yaml:"revoked"`

	pos pos
}

// AllModels is the one-element models list that allows every model.
const AllModels = "*"

// Load reads and parses the seed file at path; its problems are reported
// with the path.
func Load(path string) (*Seed, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	defer f.Close()
	s, err := Parse(f)
	if e, ok := errors.AsType[*Error](err); ok {
		e.File = path
	}
	return s, err
}

// Parse reads a seed, rejecting unknown fields, and validates it. The error
// is an *Error listing every problem with its line.
func Parse(r io.Reader) (*Seed, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("seed: read: %w", err)
	}
	// Once as a node tree, for the lines of what is validated below ...
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		return nil, &Error{Problems: []Problem{{Line: 1, Msg: "the seed is empty; declare tenants"}}}
	case err != nil:
		return nil, yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &Error{Problems: []Problem{{Line: extra.Line, Msg: "a seed is one YAML document; remove the second"}}}
	}
	// ... and once strictly into the structs, so an unknown field is an
	// error. Unknown fields alone leave the rest decoded, so the rules are
	// checked too and every problem is reported; a wrong type is reported
	// alone, as the value it left behind would break rules spuriously.
	var s Seed
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	var problems []Problem
	if err := strict.Decode(&s); err != nil {
		ye := yamlError(err)
		var e *Error
		if !errors.As(ye, &e) || !onlyUnknownFields(e) {
			return nil, ye
		}
		problems = e.Problems
	}
	s.locate(&doc)
	if err := s.validate(); err != nil {
		var e *Error
		if !errors.As(err, &e) {
			return nil, err
		}
		problems = append(problems, e.Problems...)
	}
	if err := errorOf(problems); err != nil {
		return nil, err
	}
	return &s, nil
}

// onlyUnknownFields reports whether every problem of e is an unknown
// field.
func onlyUnknownFields(e *Error) bool {
	for _, p := range e.Problems {
		if !strings.HasPrefix(p.Msg, "unknown field ") {
			return false
		}
	}
	return true
}

// expireTime parses ExpiresAt; zero when it is empty.
func (k *Key) expireTime() (time.Time, error) {
	if k.ExpiresAt == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339, k.ExpiresAt)
}
