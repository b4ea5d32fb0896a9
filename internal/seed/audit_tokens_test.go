package seed

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const withTokens = `tenants:
  - id: acme
    keys:
      - label: ci
        secret: tgk_dev_acme_ci
        models: ["*"]
    audit_tokens: ["tga_dev_acme_audit", "tga_dev_acme_audit2"]
  - id: other
    audit_tokens:
      - tga_dev_other_audit
  - id: none
`

func TestAuditTokensParse(t *testing.T) {
	s, err := Parse(strings.NewReader(withTokens))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Tenants[0].AuditTokens, []string{"tga_dev_acme_audit", "tga_dev_acme_audit2"}) ||
		!slices.Equal(s.Tenants[1].AuditTokens, []string{"tga_dev_other_audit"}) || s.Tenants[2].AuditTokens != nil {
		t.Fatalf("parsed %+v", s.Tenants)
	}
}

func TestAuditTokensErrors(t *testing.T) {
	for _, c := range []struct {
		name, in string
		lines    []int
		want     string
	}{
		{"no prefix", "tenants:\n  - id: acme\n    audit_tokens: [\"dev_acme_audit_x\"]\n", []int{3}, "must start with tga_"},
		{"short", "tenants:\n  - id: acme\n    audit_tokens:\n      - tga_short\n", []int{4}, "at least 12"},
		{"with a space", "tenants:\n  - id: acme\n    audit_tokens: [\"tga_with space\"]\n", []int{3}, "printable"},
		{"twice", "tenants:\n  - id: acme\n    audit_tokens: [tga_dev_shared_1]\n  - id: beta\n    audit_tokens:\n      - tga_dev_shared_1\n", []int{6}, "already declared (tenant \"acme\", line 3)"},
		{"a key's secret", "tenants:\n  - id: acme\n    keys:\n      - label: ci\n        secret: tga_dev_acme_ci\n        models: [\"*\"]\n    audit_tokens: [tga_dev_acme_ci]\n", []int{5, 7}, "is the secret of tenant \"acme\" key \"ci\""},
		{"not a list", "tenants:\n  - id: acme\n    audit_tokens: tga_dev_acme_audit\n", []int{3}, "cannot unmarshal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(c.in))
			e, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("%v, want *Error", err)
			}
			var lines []int
			for _, p := range e.Problems {
				lines = append(lines, p.Line)
			}
			if !slices.Equal(lines, c.lines) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("problems at %v: %v; want lines %v and %q", lines, err, c.lines, c.want)
			}
			// (YAML's own type errors quote the value's start.)
			if c.name != "not a list" && strings.Contains(err.Error(), "tga_dev") {
				t.Errorf("message shows a token: %v", err)
			}
		})
	}
}

type tokenSink map[string][]string

func (s tokenSink) SetAuditTokens(_ context.Context, tenant string, tokens []string) error {
	if tenant == "fail" {
		return errors.New("refused")
	}
	s[tenant] = tokens
	return nil
}

func TestApplyAuditTokens(t *testing.T) {
	s, err := Parse(strings.NewReader(withTokens))
	if err != nil {
		t.Fatal(err)
	}
	got := tokenSink{}
	if err := s.ApplyAuditTokens(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	want := tokenSink{"acme": {"tga_dev_acme_audit", "tga_dev_acme_audit2"}, "other": {"tga_dev_other_audit"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("applied %v", got)
	}
	s.Tenants = append(s.Tenants, Tenant{ID: "fail", AuditTokens: []string{"tga_dev_fail_audit"}})
	if err := s.ApplyAuditTokens(context.Background(), got); err == nil || !strings.Contains(err.Error(), "tenant fail") {
		t.Fatalf("a refused token: %v", err)
	}
}
