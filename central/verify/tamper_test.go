package verify_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/verify"
)

var (
	proofKeys = []string{"appliance_id", "day", "request_id", "sequence", "leaf_index", "tree_size", "leaf_hash", "audit_path", "head"}
	headKeys  = []string{"tenant_id", "appliance_id", "day", "event_count", "last_sequence", "merkle_root", "signature", "signed_at", "certificate"}
)

// set returns the proof document with a member replaced by raw JSON
// ("head.x" for a member of the head), keeping the served order.
func set(t *testing.T, doc []byte, member, raw string) []byte {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(doc, &top); err != nil {
		t.Fatal(err)
	}
	if name, ok := strings.CutPrefix(member, "head."); ok {
		var h map[string]json.RawMessage
		if err := json.Unmarshal(top["head"], &h); err != nil {
			t.Fatal(err)
		}
		h[name] = json.RawMessage(raw)
		top["head"] = ordered(h, headKeys)
	} else {
		top[member] = json.RawMessage(raw)
	}
	return ordered(top, proofKeys)
}

func ordered(m map[string]json.RawMessage, keys []string) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + k + `":`)
		b.Write(m[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// member returns the raw JSON of a member ("head.x" inside the head).
func member(t *testing.T, doc []byte, name string) string {
	t.Helper()
	var top map[string]json.RawMessage
	_ = json.Unmarshal(doc, &top)
	if n, ok := strings.CutPrefix(name, "head."); ok {
		var h map[string]json.RawMessage
		_ = json.Unmarshal(top["head"], &h)
		return string(h[n])
	}
	return string(top[name])
}

// flip changes the character at i of a JSON string value to another one
// of the same alphabet.
func flip(raw string, i int) string {
	b := []byte(raw)
	switch c := b[i]; c {
	case 'f':
		b[i] = '0'
	case '9':
		b[i] = 'a'
	case 'z', 'Z':
		b[i] = 'b'
	default:
		b[i] = c + 1
	}
	return string(b)
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestTamperedProof(t *testing.T) {
	ca, err := verify.LoadCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	doc, leafBytes := read(t, proofFile), read(t, leafFile)
	other := centraltest.NewFleet(t)
	// The golden fleet's CA key is not kept: certificates come from another
	// fleet (a head naming another appliance is head.appliance_id below).
	stranger := quote(string(other.Appliance(t, "app_golden").CertPEM))
	otherApp := quote(string(other.Appliance(t, "app_other").CertPEM))
	cert := member(t, doc, "head.certificate")
	path := member(t, doc, "audit_path")
	var hashes []string
	_ = json.Unmarshal([]byte(path), &hashes)
	mustJSON := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	for _, c := range []struct {
		name   string
		doc    []byte
		noLeaf bool
		want   verify.Kind
	}{
		{"appliance_id", set(t, doc, "appliance_id", `"app_gold"`), false, verify.Mismatch},
		{"day", set(t, doc, "day", `"2026-01-01"`), false, verify.Mismatch},
		{"request_id with the leaf", set(t, doc, "request_id", `"req_other1"`), false, verify.LeafMismatch},
		{"sequence with the leaf", set(t, doc, "sequence", `4`), false, verify.LeafMismatch},
		{"sequence past last_sequence", set(t, doc, "sequence", `11`), true, verify.Mismatch},
		{"sequence below leaf_index", set(t, doc, "sequence", `2`), true, verify.Mismatch},
		{"leaf_index", set(t, doc, "leaf_index", `1`), true, verify.Inclusion},
		{"leaf_index out of the tree", set(t, doc, "leaf_index", `5`), true, verify.Mismatch},
		{"tree_size", set(t, doc, "tree_size", `4`), true, verify.Mismatch},
		{"leaf_hash", set(t, doc, "leaf_hash", flip(member(t, doc, "leaf_hash"), 5)), true, verify.Inclusion},
		{"audit_path hash", set(t, doc, "audit_path", mustJSON(append([]string{flip(quote(hashes[0]), 3)[1:65]}, hashes[1:]...))), true, verify.Inclusion},
		{"audit_path shorter", set(t, doc, "audit_path", mustJSON(hashes[:len(hashes)-1])), true, verify.Inclusion},
		{"audit_path longer", set(t, doc, "audit_path", mustJSON(append(hashes, hashes[0]))), true, verify.Inclusion},
		{"head.tenant_id", set(t, doc, "head.tenant_id", `"acmf"`), true, verify.Signature},
		{"head.appliance_id", set(t, doc, "head.appliance_id", `"app_gold"`), true, verify.Appliance},
		{"head.day earlier", set(t, doc, "head.day", `"2026-01-01"`), true, verify.Signature},
		{"head.day after signed_at", set(t, doc, "head.day", `"2099-01-01"`), true, verify.HeadRule},
		{"head.event_count", set(t, doc, "head.event_count", `4`), true, verify.Signature},
		{"head.event_count above last_sequence", set(t, doc, "head.event_count", `11`), true, verify.HeadRule},
		{"head.last_sequence", set(t, doc, "head.last_sequence", `12`), true, verify.Signature},
		{"head.merkle_root", set(t, doc, "head.merkle_root", flip(member(t, doc, "head.merkle_root"), 10)), true, verify.Signature},
		{"head.signature", set(t, doc, "head.signature", flip(member(t, doc, "head.signature"), 20)), true, verify.Signature},
		{"head.signed_at", set(t, doc, "head.signed_at", flip(member(t, doc, "head.signed_at"), 19)), true, verify.Signature},
		{"head.signed_at after the certificate", set(t, doc, "head.signed_at", `"2099-01-01T00:00:00Z"`), true, verify.Certificate},
		{"head.certificate of another fleet", set(t, doc, "head.certificate", stranger), true, verify.Certificate},
		{"head.certificate of another fleet's appliance", set(t, doc, "head.certificate", otherApp), true, verify.Certificate},
		{"head.certificate byte", set(t, doc, "head.certificate", flip(cert, 200)), true, verify.Certificate},
		{"head.certificate line break", set(t, doc, "head.certificate", strings.Replace(cert, `\n`, `\t`, 2)), true, verify.Malformed},
		{"unknown member", bytes.Replace(doc, []byte(`{"appliance_id"`), []byte(`{"x":1,"appliance_id"`), 1), true, verify.Malformed},
		{"member twice", bytes.Replace(doc, []byte(`{"appliance_id"`), []byte(`{"day":"2026-01-01","appliance_id"`), 1), true, verify.Malformed},
		{"member missing", bytes.Replace(doc, []byte(`"tree_size":5,`), nil, 1), true, verify.Malformed},
		{"member name case", bytes.Replace(doc, []byte(`"tree_size"`), []byte(`"Tree_size"`), 1), true, verify.Malformed},
		{"number as string", set(t, doc, "tree_size", `"5"`), true, verify.Malformed},
		{"number with fraction", set(t, doc, "tree_size", `5.0`), true, verify.Malformed},
		{"number with exponent", set(t, doc, "tree_size", `5e0`), true, verify.Malformed},
		{"uppercase hex", set(t, doc, "leaf_hash", strings.ToUpper(member(t, doc, "leaf_hash"))), true, verify.Malformed},
		{"trailing data", append(append([]byte{}, doc...), []byte(`{}`)...), true, verify.Malformed},
		{"not JSON", []byte("proof"), true, verify.Malformed},
		{"not UTF-8", append(append([]byte{}, doc[:10]...), 0xff), true, verify.Malformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			lb := leafBytes
			if c.noLeaf {
				lb = nil
			}
			_, err := verify.ProofDocument(c.doc, ca, lb)
			if got := verify.KindOf(err); got != c.want {
				t.Fatalf("got %v (%v), want %v", got, err, c.want)
			}
		})
	}
	// Unbound without the leaf: documented (docs/central.md).
	if _, err := verify.ProofDocument(set(t, doc, "request_id", `"req_other1"`), ca, nil); err != nil {
		t.Fatalf("request_id is not bound without the leaf, yet: %v", err)
	}
}

func TestTamperedHeads(t *testing.T) {
	ca, err := verify.LoadCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	doc := read(t, headsFile)
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(doc, &list); err != nil {
		t.Fatal(err)
	}
	empty, full := list.Data[0], list.Data[1]
	withHead := func(h []byte) []byte { return append(append([]byte(`{"data":[`), h...), ']', '}') }
	for _, c := range []struct {
		name string
		doc  []byte
		want verify.Kind
	}{
		{"one head object", full, 0},
		{"the empty tree", empty, 0},
		{"empty tree with a root", bytes.Replace(empty, []byte(`"merkle_root":"e3b0`), []byte(`"merkle_root":"e3b1`), 1), verify.HeadRule},
		{"empty tree with events", bytes.Replace(withHead(empty), []byte(`"event_count":0`), []byte(`"event_count":1`), 1), verify.HeadRule},
		{"a tampered head in the list", bytes.Replace(doc, []byte(`"event_count":5`), []byte(`"event_count":4`), 1), verify.Signature},
		{"data missing", []byte(`{}`), verify.Malformed},
		{"data not a list", []byte(`{"data":{}}`), verify.Malformed},
		{"empty list", []byte(`{"data":[]}`), 0},
		// A page of a paged list: next_page_token is not signed, and
		// not a head; it is read as a string and otherwise ignored.
		{"a page", []byte(`{"data":[` + string(full) + `],"next_page_token":"YXBwX29uZQ"}`), 0},
		{"a page with a tampered head", bytes.Replace([]byte(`{"data":[`+string(full)+`],"next_page_token":"YXBwX29uZQ"}`),
			[]byte(`"event_count":5`), []byte(`"event_count":4`), 1), verify.Signature},
		{"an empty next_page_token", []byte(`{"data":[],"next_page_token":""}`), verify.Malformed},
		{"next_page_token not a string", []byte(`{"data":[],"next_page_token":1}`), verify.Malformed},
		{"next_page_token twice", []byte(`{"data":[],"next_page_token":"a","next_page_token":"b"}`), verify.Malformed},
		{"another member", []byte(`{"data":[],"next_page":"a"}`), verify.Malformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := verify.HeadsDocument(c.doc, ca)
			if got := verify.KindOf(err); got != c.want || (c.want == 0 && err != nil) {
				t.Fatalf("got %v (%v), want %v", got, err, c.want)
			}
		})
	}
}

// TestEveryByte: changing any one byte of a served document, to any of
// three other values, makes verification fail (with the leaf, for the
// proof: request_id and sequence are bound by it).
func TestEveryByte(t *testing.T) {
	ca, err := verify.LoadCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	leafBytes := read(t, leafFile)
	for _, c := range []struct {
		file  string
		check func([]byte) error
	}{
		{proofFile, func(b []byte) error { _, err := verify.ProofDocument(b, ca, leafBytes); return err }},
		{headsFile, func(b []byte) error { _, err := verify.HeadsDocument(b, ca); return err }},
	} {
		doc := read(t, c.file)
		if err := c.check(doc); err != nil {
			t.Fatal(err)
		}
		for i := range doc {
			for _, x := range []byte{0x01, 0x02, 0x20} {
				mut := append([]byte(nil), doc...)
				mut[i] ^= x
				if err := c.check(mut); err == nil {
					t.Fatalf("%s: byte %d changed from %q to %q still verifies", c.file, i, doc[i], mut[i])
				}
			}
		}
	}
}

func TestCAFile(t *testing.T) {
	dir := t.TempDir()
	appCert := filepath.Join(dir, "appliance.pem")
	f := centraltest.NewFleet(t)
	if err := os.WriteFile(appCert, f.Appliance(t, "app_x").CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.pem")
	_ = os.WriteFile(garbage, []byte("not a certificate"), 0o644)
	otherCA := filepath.Join(dir, "other-ca.pem")
	_ = os.WriteFile(otherCA, f.CA.CertPEM, 0o644)
	for _, c := range []struct {
		file string
		want verify.Kind
	}{
		{filepath.Join(dir, "missing.pem"), verify.Input},
		{garbage, verify.BadCA},
		{appCert, verify.BadCA},
	} {
		if _, err := verify.LoadCA(c.file); verify.KindOf(err) != c.want {
			t.Errorf("%s: %v, want %v", filepath.Base(c.file), err, c.want)
		}
	}
	ca, err := verify.LoadCA(otherCA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verify.ProofDocument(read(t, proofFile), ca, nil); verify.KindOf(err) != verify.Certificate {
		t.Fatalf("another fleet's CA: %v", err)
	}
}
