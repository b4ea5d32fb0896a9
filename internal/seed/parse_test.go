package seed

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const good = `# A seed with every field.
tenants:
  - id: acme
    keys:
      - label: ci
        secret: tgk_dev_acme_ci
        models: ["*"]
        rpm: 600
        tpd: 1000000
        max_output_tokens: 2048
        scopes: ["tool:get_weather"]
        expires_at: "2030-01-01T00:00:00Z"
        revoked: false
      - label: echo-only
        secret: tgk_dev_acme_echo
        models: [builtin/echo, builtin/embed]
        expires_at: 2020-01-01T00:00:00Z
        revoked: true
  - id: other
`

func TestParseGood(t *testing.T) {
	s, err := Parse(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Tenants) != 2 || s.Tenants[0].ID != "acme" || len(s.Tenants[0].Keys) != 2 || s.Tenants[1].ID != "other" {
		t.Fatalf("parsed %+v", s)
	}
	ci, err := s.Tenants[0].Keys[0].spec("acme")
	if err != nil {
		t.Fatal(err)
	}
	if !ci.AllModels || ci.Models != nil || ci.RPM != 600 || ci.TPD != 1000000 || ci.MaxOutputTokens != 2048 || ci.Secret != "tgk_dev_acme_ci" ||
		!slices.Equal(ci.Scopes, []string{"tool:get_weather"}) || ci.ExpireTime.Year() != 2030 || ci.Revoked {
		t.Fatalf("ci spec %+v", ci)
	}
	echo, err := s.Tenants[0].Keys[1].spec("acme")
	if err != nil {
		t.Fatal(err)
	}
	if echo.AllModels || !slices.Equal(echo.Models, []string{"builtin/echo", "builtin/embed"}) || !echo.Revoked ||
		echo.ExpireTime.Year() != 2020 || echo.RPM != 0 {
		t.Fatalf("echo-only spec %+v", echo)
	}
}

// seedWith is a seed of one tenant whose one key, labelled ci at line 4,
// has keyLines from line 5 on.
func seedWith(keyLines ...string) string {
	return "tenants:\n  - id: acme\n    keys:\n      - label: ci\n" + strings.Join(keyLines, "\n") + "\n"
}

func TestParseErrors(t *testing.T) {
	const (
		secret = "        secret: tgk_dev_acme_ci"
		models = `        models: ["*"]`
	)
	for _, c := range []struct {
		name  string
		in    string
		lines []int  // the lines the problems are reported at
		want  string // a part of the message
	}{
		{"empty", "", []int{1}, "empty"},
		{"only a comment", "# nothing\n", []int{1}, "empty"},
		// For syntax errors yaml.v3 names the line where the enclosing
		// block starts, not always the line at fault.
		{"not yaml", "tenants:\n  - id: acme\n   keys: [\n", []int{1}, "did not find expected"},
		{"bad indentation", "tenants:\n  - id: acme\n    keys:\n      - label: a\n     secret: x\n", []int{1}, "did not find expected key"},
		{"unknown top field", "tenants: []\nadmins: []\n", []int{2}, `unknown field "admins"`},
		{"unknown tenant field", "tenants:\n  - id: acme\n    name: Acme\n", []int{3}, `unknown field "name"`},
		{"unknown key field", seedWith(secret, models, "        expires: 2030-01-01T00:00:00Z"), []int{7}, `unknown field "expires"`},
		{"misspelt field and bad type", seedWith(secret, models, "        rmp: 5", "        tpd: lots"), []int{7, 8}, "line 8: cannot unmarshal"},
		{"models not a list", seedWith(secret, `        models: "*"`), []int{6}, "cannot unmarshal"},
		{"second document", "tenants: []\n---\ntenants: []\n", []int{2}, "one YAML document"},
		{"duplicate field", "tenants:\n  - id: acme\n    id: beta\n", []int{3}, "already defined"},
		{"bad tenant id", "tenants:\n  - id: Acme\n", []int{2}, "tenant id"},
		{"missing tenant id", "tenants:\n  - keys: []\n", []int{2}, "tenant id"},
		{"duplicate tenant", "tenants:\n  - id: acme\n  - id: acme\n", []int{3}, "declared twice (first at line 2)"},
		{"missing secret", seedWith(models), []int{4}, "secret must start with tgk_"},
		{"short secret", seedWith("        secret: tgk_short", models), []int{5}, "at least 12"},
		{"secret without prefix", seedWith("        secret: sk_dev_acme_ci_long", models), []int{5}, "start with tgk_"},
		{"missing models", seedWith(secret), []int{4}, "models is required"},
		{"star and more", seedWith(secret, `        models: ["*", builtin/echo]`), []int{6}, "stands alone"},
		{"bad model in a block list", seedWith(secret, "        models:", "          - builtin/echo", "          - echo"), []int{8}, `model "echo"`},
		{"negative rpm", seedWith(secret, models, "        rpm: -1"), []int{7}, "rpm must be 0"},
		{"tpd above the most", seedWith(secret, models, "        tpd: 1000000000000001"), []int{7}, "tpd must be 0 (no limit) to 1000000000000000"},
		{"negative max_output_tokens", seedWith(secret, models, "        max_output_tokens: -1"), []int{7}, "max_output_tokens must be 0 (no limit) to 1000000000"},
		{"max_output_tokens above the most", seedWith(secret, models, "        max_output_tokens: 1000000001"), []int{7}, "max_output_tokens must be 0 (no limit) to 1000000000"},
		{"fractional max_output_tokens", seedWith(secret, models, "        max_output_tokens: 0.5"), []int{7}, "max_output_tokens must be a whole number"},
		{"fractional tpd", seedWith(secret, models, "        tpd: 1.5"), []int{7}, "tpd must be a whole number"},
		{"bad scope", seedWith(secret, models, `        scopes: ["tool:ok", "admin"]`), []int{7}, `scope "admin"`},
		{"date without time", seedWith(secret, models, "        expires_at: 2030-01-01"), []int{7}, "RFC 3339"},
		{"not a time", seedWith(secret, models, "        expires_at: soon"), []int{7}, "RFC 3339"},
		{"revoked not a bool", seedWith(secret, models, "        revoked: maybe"), []int{7}, "cannot unmarshal"},
		{"duplicate label", seedWith(secret, models, "      - label: ci", "        secret: tgk_dev_acme_ci2", models), []int{7}, "two keys labelled \"ci\" (first at line 4)"},
		{"shared secret", seedWith(secret, models, "      - label: cd", secret, models), []int{8}, "same secret as tenant \"acme\" key \"ci\" (line 5)"},
		{"empty label", "tenants:\n  - id: acme\n    keys:\n      - label: \"\"\n" + secret + "\n" + models + "\n", []int{4}, "label must be"},
		{"unknown fields and a broken rule", seedWith(secret, models, "        bogus: 1", "        other: 2", "  - id: Bad!"), []int{7, 8, 9}, "line 9: tenant id"},
		{"unknown field and a missing field", seedWith(secret, "        modles: [\"*\"]"), []int{4, 6}, `line 6: unknown field "modles"`},
		{"several problems, in line order", seedWith("        secret: x", "        models: [nope]", "        rpm: -5"), []int{5, 6, 7}, "line 5:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(c.in))
			if err == nil {
				t.Fatalf("parsed:\n%s", c.in)
			}
			e, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("%T %v, want *Error", err, err)
			}
			var lines []int
			for _, p := range e.Problems {
				lines = append(lines, p.Line)
			}
			if !slices.Equal(lines, c.lines) {
				t.Errorf("problems at lines %v, want %v: %v", lines, c.lines, err)
			}
			for _, l := range c.lines {
				if !strings.Contains(err.Error(), "line "+strconv.Itoa(l)+":") {
					t.Errorf("message does not say line %d: %v", l, err)
				}
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("message lacks %q: %v", c.want, err)
			}
			if strings.Contains(err.Error(), "tgk_dev_acme_ci") {
				t.Errorf("message shows a secret: %v", err)
			}
		})
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seed.yaml")
	if err := os.WriteFile(path, []byte("tenants:\n  - id: Bad\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), "seed "+path+": line 2: ") {
		t.Fatalf("Load: %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
	if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err != nil {
		t.Fatal(err)
	}
}
