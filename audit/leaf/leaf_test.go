package leaf

import (
	"bytes"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/rfc6962"
)

// example is the leaf of the worked example in docs/audit-format.md.
func example() Leaf {
	return Leaf{
		Schema:           Schema,
		RequestID:        "req_01JQ7K2M9V4T",
		Sequence:         7,
		TenantID:         "acme",
		ApplianceID:      "app_example",
		KeyID:            "key_9f2c",
		Time:             FormatTime(time.Date(2026, 3, 1, 12, 0, 0, 250000000, time.UTC)),
		Endpoint:         "/v1/chat/completions",
		Model:            "builtin/echo",
		Status:           200,
		PromptTokens:     12,
		CompletionTokens: 5,
		PolicyDecisionID: "dec_5d41402abc4b2a76b9719d911017c592",
		RequestSHA256:    BodyHash([]byte(`{"model":"builtin/echo","messages":[{"role":"user","content":"hi"}]}`)),
		ResponseSHA256:   BodyHash([]byte(`{"id":"chatcmpl-1","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}]}`)),
		Salt:             "000102030405060708090a0b0c0d0e0f",
	}
}

// goldenLeaf and goldenLeafHash are the canonical bytes and leaf hash of
// example(); docs/audit-format.md shows both.
const (
	goldenLeaf     = `{"appliance_id":"app_example","completion_tokens":5,"endpoint":"/v1/chat/completions","key_id":"key_9f2c","model":"builtin/echo","policy_decision_id":"dec_5d41402abc4b2a76b9719d911017c592","prompt_tokens":12,"request_id":"req_01JQ7K2M9V4T","request_sha256":"33a7d47c43ece8caacb16b3d57b4357a92c8805542b58ae5bf1e066a06482a7b","response_sha256":"f963f82dfff6c8520aa310307de1772b19474ef7985582dfc579ca6d584c62fb","salt":"000102030405060708090a0b0c0d0e0f","schema":"tollgate-audit-leaf/v1","sequence":7,"status":200,"tenant_id":"acme","time":"2026-03-01T12:00:00.250000Z"}`
	goldenLeafHash = "74195b9bd0a573c6324cc455a7beb83d55b8ea04048d0d08b0d576651d797130"
)

func golden() string { return goldenLeaf }

func TestCanonicalGolden(t *testing.T) {
	got, err := Canonical(example())
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != golden() {
		t.Fatalf("canonical bytes\n got %s\nwant %s", got, golden())
	}
	if h := hex.EncodeToString(Hash(got)); h != goldenLeafHash {
		t.Fatalf("leaf hash = %s, want %s", h, goldenLeafHash)
	}
}

func TestDocShowsGoldenLeaf(t *testing.T) {
	doc, err := os.ReadFile("../../docs/audit-format.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{golden(), goldenLeafHash} {
		if !bytes.Contains(doc, []byte(want)) {
			t.Errorf("docs/audit-format.md does not contain %s", want)
		}
	}
}

func TestCanonicalEscapesPerRFC8785(t *testing.T) {
	l := example()
	l.Model = "a<b>&\"c\"\u2028é\x01"
	l.PolicyDecisionID = ""
	got, err := Canonical(l)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(got, []byte(`"model":"a<b>&\"c\"`+"\u2028é"+`\u0001"`)) {
		t.Fatalf("model not serialised per RFC 8785: %s", got)
	}
	if bytes.Contains(got, []byte("policy_decision_id")) {
		t.Fatalf("empty policy_decision_id must be omitted: %s", got)
	}
	back, err := Parse(got)
	if err != nil || back != l {
		t.Fatalf("Parse round trip = %+v, %v", back, err)
	}
}

func TestParseRefuses(t *testing.T) {
	canon := golden()
	tests := []struct {
		name string
		in   string
	}{
		{"whitespace", strings.Replace(canon, `,"completion_tokens"`, `, "completion_tokens"`, 1)},
		{"member order", `{"completion_tokens":5,` + strings.Replace(canon[1:], `"completion_tokens":5,`, "", 1)},
		{"unknown member", strings.Replace(canon, `{"appliance_id"`, `{"aa":1,"appliance_id"`, 1)},
		{"bad sequence", strings.Replace(canon, `"sequence":7`, `"sequence":0`, 1)},
		{"not json", "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse([]byte(tt.in)); err == nil {
				t.Fatalf("Parse accepted %s", tt.in)
			}
		})
	}
	if _, err := Parse([]byte(canon)); err != nil {
		t.Fatalf("Parse(golden) = %v", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Leaf)
	}{
		{"schema", func(l *Leaf) { l.Schema = "v0" }},
		{"request id", func(l *Leaf) { l.RequestID = "r1" }},
		{"tenant", func(l *Leaf) { l.TenantID = "a/b" }},
		{"appliance", func(l *Leaf) { l.ApplianceID = "x" }},
		{"key", func(l *Leaf) { l.KeyID = "" }},
		{"decision", func(l *Leaf) { l.PolicyDecisionID = "d" }},
		{"sequence zero", func(l *Leaf) { l.Sequence = 0 }},
		{"sequence too big", func(l *Leaf) { l.Sequence = 1 << 53 }},
		{"time not utc micro", func(l *Leaf) { l.Time = "2026-03-01T12:00:00Z" }},
		{"endpoint", func(l *Leaf) { l.Endpoint = "" }},
		{"status", func(l *Leaf) { l.Status = 99 }},
		{"tokens", func(l *Leaf) { l.PromptTokens = -1 }},
		{"request hash", func(l *Leaf) { l.RequestSHA256 = "AB" }},
		{"response hash upper", func(l *Leaf) { l.ResponseSHA256 = strings.ToUpper(l.ResponseSHA256) }},
		{"salt short", func(l *Leaf) { l.Salt = "00" }},
		{"salt odd length", func(l *Leaf) { l.Salt += "0" }},
		{"salt not hex", func(l *Leaf) { l.Salt = "g" + l.Salt[1:] }},
		{"salt one upper digit", func(l *Leaf) { l.Salt = l.Salt[:31] + "F" }},
		{"time no zone", func(l *Leaf) { l.Time = "2026-03-01T12:00:00.000000" }},
		{"time offset", func(l *Leaf) { l.Time = "2026-03-01T12:00:00.000000+01:00" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := example()
			tt.mutate(&l)
			if err := l.Validate(); err == nil {
				t.Fatal("Validate accepted")
			}
			if _, err := Canonical(l); err == nil {
				t.Fatal("Canonical accepted")
			}
		})
	}
}

// TestCheckHexMatchesRoundTrip holds checkHex to its definition: s is what
// hex.EncodeToString writes for n bytes.
func TestCheckHexMatchesRoundTrip(t *testing.T) {
	for _, s := range []string{"", "0", "00", "0f", "0F", "f0", "ff", "fg", "g0", "0 ", "-1",
		"09af", "09AF", "9a", "/0", ":0", "`0", "a:", "\x00\x00", "é0", "0000"} {
		for n := 0; n <= 2; n++ {
			b, err := hex.DecodeString(s)
			want := err == nil && len(b) == n && hex.EncodeToString(b) == s
			if got := checkHex("f", s, n) == nil; got != want {
				t.Errorf("checkHex(%q, %d) accepted %v, want %v", s, n, got, want)
			}
		}
	}
}

func TestNewSalt(t *testing.T) {
	a, err := NewSalt(nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSalt(nil)
	if len(a) != 2*SaltSize || a == b {
		t.Fatalf("salts %s %s", a, b)
	}
	if _, err := NewSalt(strings.NewReader("short")); err == nil {
		t.Fatal("NewSalt accepted a short reader")
	}
	if got, _ := NewSalt(strings.NewReader("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\xff")); got != "000102030405060708090a0b0c0d0eff" {
		t.Fatalf("NewSalt of known bytes = %s", got)
	}
}

// TestHashIsRFC6962 holds Hash to the library's RFC 6962 leaf hash, and
// to one allocation (the sum).
func TestHashIsRFC6962(t *testing.T) {
	canon, err := Canonical(example())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{nil, {}, {0}, []byte("leaf"), canon} {
		if got, want := Hash(b), rfc6962.DefaultHasher.HashLeaf(b); !bytes.Equal(got, want) {
			t.Errorf("Hash(%q) = %x, want %x", b, got, want)
		}
	}
	if got := testing.AllocsPerRun(100, func() { _ = Hash(canon) }); got > 1 {
		t.Errorf("Hash: %v allocations, want 1", got)
	}
}

func TestBodyHash(t *testing.T) {
	for body, want := range map[string]string{
		"":   "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"hi": "8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4",
	} {
		if got := BodyHash([]byte(body)); got != want {
			t.Errorf("BodyHash(%q) = %s, want %s", body, got, want)
		}
	}
	if got := testing.AllocsPerRun(100, func() { _ = BodyHash([]byte("hi")) }); got > 1 {
		t.Errorf("BodyHash: %v allocations, want 1 (the string)", got)
	}
}

func BenchmarkCanonical(b *testing.B) {
	l := example()
	for b.Loop() {
		if _, err := Canonical(l); err != nil {
			b.Fatal(err)
		}
	}
}
