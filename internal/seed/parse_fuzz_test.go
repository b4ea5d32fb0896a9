package seed

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzParse: the seed parser under arbitrary files. It never panics; a
// refusal is an *Error whose every problem has a message and a line of
// the file (or none, when YAML gave none); a seed it accepts gives every
// key a valid specification (what Apply writes), and, written back as
// YAML, parses to the same seed. Seeds: the documented example, the
// test's seeds and testdata/fuzz/FuzzParse/.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		good,
		"tenants:\n  - id: acme\n    audit_tokens: [\"tga_dev_acme_audit\"]\n    keys:\n      - label: a\n        secret: tgk_0123456789\n        models: [\"*\"]\n",
		"tenants:\n  - id: acme\n    keys:\n      - label: a\n        secret: tgk_short\n        models: []\n        rpm: 1.5\n        colour: red\n",
		"tenants:\n  - id: Bad Id\n  - id: acme\n  - id: acme\n",
		"tenants: [&a {id: x, keys: [*a]}]\n",
		"a: &a [*a, *a]\n",
		"---\ntenants: []\n---\ntenants: []\n",
		"tenants:\n  - id: acme\n    keys:\n      - label: a\n        secret: tgk_0123456789\n        models: [\"*\", \"builtin/echo\"]\n        expires_at: yesterday\n        tpd: 1e16\n",
		"", "\t", "tenants: 5", "{", "!!binary AAAA",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(strings.NewReader(string(data)))
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || len(e.Problems) == 0 {
				t.Fatalf("refused without the problems listed: %v", err)
			}
			lines := lineBreaks(string(data)) + 2
			for _, p := range e.Problems {
				if p.Msg == "" || p.Line < 0 || p.Line > lines {
					t.Fatalf("problem %+v of a file of %d lines", p, lines-2)
				}
			}
			return
		}
		for _, tn := range s.Tenants {
			for _, k := range tn.Keys {
				if _, err := k.spec(tn.ID); err != nil {
					t.Fatalf("accepted key %q of %s has no valid specification: %v", k.Label, tn.ID, err)
				}
			}
		}
		out, err := yaml.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(strings.NewReader(string(out)))
		if err != nil {
			t.Fatalf("an accepted seed, written back as\n%s\nis refused: %v", out, err)
		}
		if !reflect.DeepEqual(withoutPositions(back), withoutPositions(s)) {
			t.Fatalf("an accepted seed, written back as\n%s\nparses to %+v, not %+v", out, back, s)
		}
	})
}

// withoutPositions is s without the lines its parts were found at, an
// empty list and an absent one alike (YAML writes both as []).
func withoutPositions(s *Seed) Seed {
	var c Seed
	for _, tn := range s.Tenants {
		tn.pos = pos{}
		tn.AuditTokens = nilIfEmpty(tn.AuditTokens)
		keys := tn.Keys
		tn.Keys = nil
		for _, k := range keys {
			k.pos = pos{}
			k.Models, k.Scopes = nilIfEmpty(k.Models), nilIfEmpty(k.Scopes)
			tn.Keys = append(tn.Keys, k)
		}
		c.Tenants = append(c.Tenants, tn)
	}
	return c
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// lineBreaks counts the line breaks of a YAML file as the parser does
// when it numbers lines: CR LF, CR, LF, NEL, LS and PS, each one break.
func lineBreaks(s string) int {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	n := 0
	for _, b := range []string{"\r", "\n", "\u0085", "\u2028", "\u2029"} {
		n += strings.Count(s, b)
	}
	return n
}
