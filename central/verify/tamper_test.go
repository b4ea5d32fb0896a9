package verify_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/verify"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

var (
	proofKeys = []string{"appliance_id", "day", "request_id", "sequence", "leaf_index", "tree_size", "leaf_hash", "audit_path", "head", "leaf"}
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
	another := centraltest.NewTree("acme", centraltest.NewFleet(t).Appliance(t, "app_golden"))
	another.Add(1)
	otherLeaf := another.Canonical[0]
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
		// The proof's own leaf binds its members, without --leaf.
		{"request_id", set(t, doc, "request_id", `"req_other1"`), true, verify.LeafMismatch},
		{"sequence", set(t, doc, "sequence", `4`), true, verify.LeafMismatch},
		{"appliance_id and head.appliance_id", set(t, set(t, doc, "appliance_id", `"app_gold"`), "head.appliance_id", `"app_gold"`), true, verify.Appliance},
		{"leaf byte", set(t, doc, "leaf", flip(member(t, doc, "leaf"), 30)), true, verify.LeafMismatch},
		{"leaf of another tenant", set(t, doc, "leaf", quote(strings.Replace(string(leafBytes), `"tenant_id":"acme"`, `"tenant_id":"beta"`, 1))), true, verify.LeafMismatch},
		{"leaf time", set(t, doc, "leaf", quote(strings.Replace(string(leafBytes), `"time":"2`, `"time":"1`, 1))), true, verify.LeafMismatch},
		{"leaf of another request", set(t, doc, "leaf", quote(string(otherLeaf))), true, verify.LeafMismatch},
		{"leaf re-serialised", set(t, doc, "leaf", quote(" "+string(leafBytes))), true, verify.LeafMismatch},
		{"leaf dropped", set(t, doc, "leaf", `""`), true, verify.LeafMismatch},
		{"leaf dropped and request_id", set(t, set(t, doc, "leaf", `""`), "request_id", `"req_other1"`), true, verify.LeafMismatch},
		{"leaf dropped, given", set(t, doc, "leaf", `""`), false, 0},
		{"leaf dropped, another given", set(t, doc, "leaf", `""`), false, verify.LeafMismatch},
		{"leaf not a string", set(t, doc, "leaf", `{}`), true, verify.Malformed},
		{"leaf null", set(t, doc, "leaf", `null`), true, verify.Malformed},
		{"leaf beyond 16 KiB", set(t, doc, "leaf", quote(strings.Repeat("x", 16<<10+1))), true, verify.Malformed},
		{"leaf missing", bytes.Replace(doc, []byte(`,"leaf":`+member(t, doc, "leaf")), nil, 1), true, verify.Malformed},
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
			if strings.HasSuffix(c.name, "another given") {
				lb = otherLeaf
			}
			_, err := verify.ProofDocument(c.doc, ca, lb)
			if got := verify.KindOf(err); got != c.want || (c.want == 0 && err != nil) {
				t.Fatalf("got %v (%v), want %v", got, err, c.want)
			}
		})
	}
}

// TestLeafNamesAnotherTree: a leaf whose hash the head's tree holds, but
// which names another tenant or appliance than the head (which no
// central plane takes, and an appliance never signs), does not prove the
// head's event; nor does one whose request_id or sequence the proof
// does not name.
func TestLeafNamesAnotherTree(t *testing.T) {
	f := centraltest.NewFleet(t)
	app, other := f.Appliance(t, "app_one"), f.Appliance(t, "app_two")
	tenant := centraltest.NewTree("beta", app)
	tenant.Add(1)
	tenant.Tenant = "acme" // the head is acme's; the leaf names beta
	appliance := centraltest.NewTree("acme", other)
	appliance.Add(1)
	appliance.App = app // the head is app_one's; the leaf names app_two
	own := centraltest.NewTree("acme", app)
	own.Add(1)
	for _, c := range []struct {
		name string
		tree *centraltest.Tree
		edit func(*verify.ProofDoc)
		want string
	}{
		{"the leaf of the head's tree", own, func(*verify.ProofDoc) {}, ""},
		{"a leaf of another tenant", tenant, func(*verify.ProofDoc) {}, "tenant_id is acme, the leaf's is beta"},
		{"a leaf of another appliance", appliance, func(*verify.ProofDoc) {}, "appliance_id is app_one, the leaf's is app_two"},
		{"another request_id", own, func(p *verify.ProofDoc) { p.RequestID = "req_other1" }, "request_id is req_other1"},
		{"another sequence", own, func(p *verify.ProofDoc) { p.Sequence = 1 }, "sequence is 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := c.tree
			p := verify.ProofDoc{
				ApplianceID: tr.App.ID, Day: tr.Day, RequestID: tr.Leaves[0].RequestID, Sequence: tr.Leaves[0].Sequence,
				LeafIndex: 0, TreeSize: 1, LeafHash: tr.Leaves[0].LeafHash, Head: tr.Head(t, time.Now()), Leaf: tr.Canonical[0],
			}
			c.edit(&p)
			if c.want == "" {
				if err := verify.Proof(p, f.CA.Cert); err != nil {
					t.Fatal(err)
				}
			}
			err := verify.BindLeaf(p, nil)
			switch {
			case c.want == "" && err != nil:
				t.Fatal(err)
			case c.want != "" && (verify.KindOf(err) != verify.LeafMismatch || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want %v saying %q", err, verify.LeafMismatch, c.want)
			}
		})
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
		// A page of a tree's history: next_from is not signed either.
		{"a history page", []byte(`{"data":[` + string(full) + `],"next_from":3}`), 0},
		{"a history page with a tampered head", bytes.Replace([]byte(`{"data":[`+string(full)+`],"next_from":3}`),
			[]byte(`"event_count":5`), []byte(`"event_count":4`), 1), verify.Signature},
		{"next_from and next_page_token", []byte(`{"data":[],"next_from":3,"next_page_token":"a"}`), verify.Malformed},
		{"next_page_token and next_from", []byte(`{"data":[],"next_page_token":"a","next_from":3}`), verify.Malformed},
		{"next_from negative", []byte(`{"data":[],"next_from":-1}`), verify.Malformed},
		{"next_from as string", []byte(`{"data":[],"next_from":"3"}`), verify.Malformed},
		{"next_from beyond 32 bits", []byte(`{"data":[],"next_from":4294967296}`), verify.Malformed},
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
// three other values, makes verification fail (for the proof, without
// --leaf: its own leaf binds request_id and sequence).
func TestEveryByte(t *testing.T) {
	ca, err := verify.LoadCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file  string
		check func([]byte) error
	}{
		{proofFile, func(b []byte) error { _, err := verify.ProofDocument(b, ca, nil); return err }},
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

var forkKeys = []string{"number", "tenant_id", "appliance_id", "day", "received_at", "signed_head", "stored_head",
	"stored_root", "stored_root_from_nodes", "consistency_proof"}

// forks returns the forks of a forks document, each as its members.
func forks(t *testing.T, doc []byte) []map[string]json.RawMessage {
	t.Helper()
	var list struct {
		Data []map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(doc, &list); err != nil {
		t.Fatal(err)
	}
	return list.Data
}

// forksDoc lays out forks as the API does, with members replaced by raw
// JSON ("signed_head.x" and "stored_head.x" inside a head).
func forksDoc(fs []map[string]json.RawMessage, set ...[2]string) []byte {
	parts := make([][]byte, len(fs))
	for i, f := range fs {
		f = maps.Clone(f)
		for _, s := range set {
			if h, name, ok := strings.Cut(s[0], "."); ok {
				var m map[string]json.RawMessage
				_ = json.Unmarshal(f[h], &m)
				m[name] = json.RawMessage(s[1])
				f[h] = ordered(m, headKeys)
			} else {
				f[s[0]] = json.RawMessage(s[1])
			}
		}
		parts[i] = ordered(f, forkKeys)
	}
	return append(append([]byte(`{"data":[`), bytes.Join(parts, []byte(","))...), ']', '}')
}

func TestTamperedForks(t *testing.T) {
	ca, err := verify.LoadCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	doc := read(t, forksFile)
	fs := forks(t, doc)
	same, nodes := fs[0], fs[1]
	var heads struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(read(t, headsFile), &heads); err != nil {
		t.Fatal(err)
	}
	// A head of another tree (app_empty's), signed by the same fleet.
	otherTree := string(heads.Data[0])
	var hashes []string
	_ = json.Unmarshal(nodes["consistency_proof"], &hashes)
	mustJSON := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	one := func(f map[string]json.RawMessage, set ...[2]string) []byte {
		return forksDoc([]map[string]json.RawMessage{f}, set...)
	}
	raw := func(f map[string]json.RawMessage, name string) string {
		if h, n, ok := strings.Cut(name, "."); ok {
			var m map[string]json.RawMessage
			_ = json.Unmarshal(f[h], &m)
			return string(m[n])
		}
		return string(f[name])
	}
	type kv = [2]string
	for _, c := range []struct {
		name string
		doc  []byte
		want verify.Kind
	}{
		{"as served, laid out again", forksDoc(fs), 0},
		{"a fork of one size", one(same), 0},
		{"a fork against the stored nodes", one(nodes), 0},
		{"a page", []byte(`{"data":[` + string(one(same)[9:len(one(same))-2]) + `],"next_from":1}`), 0},
		{"no forks", []byte(`{"data":[]}`), 0},

		// Forks that do not hold.
		{"consistency_proof hash", one(nodes, kv{"consistency_proof", mustJSON(append([]string{flip(quote(hashes[0]), 3)[1:65]}, hashes[1:]...))}), verify.Inclusion},
		{"consistency_proof last hash", one(nodes, kv{"consistency_proof", mustJSON(append(hashes[:len(hashes)-1:len(hashes)-1], flip(quote(hashes[len(hashes)-1]), 60)[1:65]))}), verify.Inclusion},
		{"consistency_proof shorter", one(nodes, kv{"consistency_proof", mustJSON(hashes[:len(hashes)-1])}), verify.Inclusion},
		{"consistency_proof longer", one(nodes, kv{"consistency_proof", mustJSON(append(hashes, hashes[0]))}), verify.Inclusion},
		{"consistency_proof empty", one(nodes, kv{"consistency_proof", `[]`}), verify.Inclusion},
		{"stored_root of another tree", one(nodes, kv{"stored_root", flip(raw(nodes, "stored_root"), 7)}), verify.Inclusion},
		{"stored_root swapped for the signed root", one(nodes, kv{"stored_root", raw(nodes, "signed_head.merkle_root")}), verify.Inclusion},
		{"roots swapped, one size", one(same, kv{"stored_root", raw(same, "signed_head.merkle_root")}), verify.Mismatch},
		{"heads agree, one size", one(same, kv{"signed_head", raw(same, "stored_head")}), verify.Mismatch},
		{"heads agree, against the nodes", one(nodes, kv{"signed_head", raw(nodes, "stored_head")}), verify.Mismatch},
		{"heads swapped", one(nodes, kv{"signed_head", raw(nodes, "stored_head")}, kv{"stored_head", raw(nodes, "signed_head")}), verify.Mismatch},
		{"heads of different trees", one(same, kv{"signed_head", otherTree}), verify.Mismatch},
		{"fork of another appliance", one(same, kv{"appliance_id", `"app_empty"`}), verify.Mismatch},
		{"fork of another tenant", one(same, kv{"tenant_id", `"acmf"`}), verify.Mismatch},
		{"fork of another day", one(nodes, kv{"day", `"2026-01-01"`}), verify.Mismatch},
		{"from nodes, one size", one(same, kv{"stored_root_from_nodes", `true`}), verify.Mismatch},
		{"not from nodes, with a proof", one(nodes, kv{"stored_root_from_nodes", `false`}), verify.Mismatch},
		{"not from nodes, two sizes", one(nodes, kv{"stored_root_from_nodes", `false`}, kv{"consistency_proof", `[]`}), verify.Mismatch},
		{"not from nodes, two sizes, the stored root", one(nodes, kv{"stored_root_from_nodes", `false`}, kv{"consistency_proof", `[]`},
			kv{"stored_root", raw(nodes, "stored_head.merkle_root")}), verify.Mismatch},
		{"a proof of one size", one(same, kv{"consistency_proof", mustJSON(hashes)}), verify.Mismatch},

		// Heads that do not verify.
		{"signed_head.tenant_id", one(same, kv{"signed_head.tenant_id", `"acmf"`}), verify.Signature},
		{"stored_head.day", one(nodes, kv{"stored_head.day", `"2026-01-01"`}), verify.Signature},
		{"signed_head.event_count", one(nodes, kv{"signed_head.event_count", `3`}), verify.Signature},
		{"stored_head.merkle_root", one(same, kv{"stored_head.merkle_root", flip(raw(same, "stored_head.merkle_root"), 9)}), verify.Signature},
		{"signed_head.signature of the other head", one(same, kv{"signed_head.signature", raw(same, "stored_head.signature")}), verify.Signature},
		{"stored_head.signature empty", one(nodes, kv{"stored_head.signature", `""`}), verify.Malformed},
		{"stored_head.signature dropped", bytes.Replace(one(nodes), []byte(`,"signature":`+raw(nodes, "stored_head.signature")), nil, 1), verify.Malformed},
		{"signed_head.appliance_id", one(same, kv{"signed_head.appliance_id", `"app_empty"`}), verify.Appliance},

		// Documents that are not strict.
		{"unknown member", one(same, kv{"number", `0,"x":1`}), verify.Malformed},
		{"unknown top-level member", []byte(`{"data":[],"next_page_token":"a"}`), verify.Malformed},
		{"member missing", bytes.Replace(one(same), []byte(`"received_at":`+raw(same, "received_at")+`,`), nil, 1), verify.Malformed},
		{"number as string", one(same, kv{"number", `"0"`}), verify.Malformed},
		{"number beyond 32 bits", one(same, kv{"number", `4294967296`}), verify.Malformed},
		{"stored_root_from_nodes as string", one(nodes, kv{"stored_root_from_nodes", `"true"`}), verify.Malformed},
		{"stored_root uppercase", one(nodes, kv{"stored_root", strings.ToUpper(raw(nodes, "stored_root"))}), verify.Malformed},
		{"consistency_proof uppercase", one(nodes, kv{"consistency_proof", strings.ToUpper(raw(nodes, "consistency_proof"))}), verify.Malformed},
		{"consistency_proof of 65 hashes", one(nodes, kv{"consistency_proof", mustJSON(slices.Repeat(hashes[:1], 65))}), verify.Malformed},
		{"consistency_proof not a list", one(nodes, kv{"consistency_proof", `null`}), verify.Malformed},
		{"received_at with a fraction", one(same, kv{"received_at", `"2026-01-01T00:00:00.5Z"`}), verify.Malformed},
		{"next_from negative", []byte(`{"data":[],"next_from":-1}`), verify.Malformed},
		{"next_from as string", []byte(`{"data":[],"next_from":"1"}`), verify.Malformed},
		{"data missing", []byte(`{"next_from":1}`), verify.Malformed},
		{"one fork, not a list", one(same)[9 : len(one(same))-2], verify.Malformed},
		{"a heads document", read(t, headsFile), verify.Malformed},
		{"more than 1000 forks", forksDoc(slices.Repeat(fs[:1], 1001)), verify.Malformed},
		{"trailing data", append(append([]byte{}, doc...), `{}`...), verify.Malformed},
		{"not UTF-8", append(append([]byte{}, doc[:10]...), 0xff), verify.Malformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := verify.ForksDocument(c.doc, ca)
			if got := verify.KindOf(err); got != c.want || (c.want == 0 && err != nil) {
				t.Fatalf("got %v (%v), want %v", got, err, c.want)
			}
		})
	}
}

// TestTamperedForkInTheList: the first fork that does not hold names its
// place in the list and its number.
func TestTamperedForkInTheList(t *testing.T) {
	ca, err := verify.LoadCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	fs := forks(t, read(t, forksFile))
	good := forksDoc(fs[:1])
	bad := forksDoc(fs[1:], [2]string{"stored_root_from_nodes", "false"})
	doc := append(append(good[:len(good)-2:len(good)-2], ','), bad[len(`{"data":[`):]...)
	_, err = verify.ForksDocument(doc, ca)
	if verify.KindOf(err) != verify.Mismatch || !strings.Contains(err.Error(), "fork 1 (number 1, acme/app_golden/") {
		t.Fatalf("got %v, want %v naming fork 1", err, verify.Mismatch)
	}
}

// TestNoFork: signed heads that the golden document cannot hold, from
// another fleet, which each verify on their own but prove no fork.
func TestNoFork(t *testing.T) {
	f := centraltest.NewFleet(t)
	one, two := f.Appliance(t, "app_one"), f.Appliance(t, "app_two")
	now := time.Now()
	tree := centraltest.NewTree("acme", one)
	tree.Add(4)
	// Another tree of 4 events: of another tenant, appliance or day.
	other := func(tenant string, app *fleet.Appliance, day string) head.Head {
		tr := centraltest.NewTree(tenant, app)
		tr.Day = day
		tr.Add(4)
		return tr.Head(t, now)
	}
	yesterday := ids.Day(now.AddDate(0, 0, -1))
	// A fork of one size, of stored_head's root.
	sameSize := func(signed, stored head.Head) verify.ForkDoc {
		root, _ := stored.Root()
		return verify.ForkDoc{
			TenantID: signed.TenantID, ApplianceID: signed.ApplianceID, Day: signed.Day, ReceivedAt: head.FormatSignedAt(now),
			SignedHead: signed, StoredHead: stored, StoredRoot: root, ConsistencyProof: [][]byte{},
		}
	}
	// Against the stored nodes: stored_root is the tree's root at 2
	// events, proven by the hash of its leaves 2 and 3.
	prefix, _ := tree.HeadAt(t, 2, now).Root()
	fromNodes := func(signed head.Head) verify.ForkDoc {
		return verify.ForkDoc{
			TenantID: signed.TenantID, ApplianceID: signed.ApplianceID, Day: signed.Day, ReceivedAt: head.FormatSignedAt(now),
			SignedHead: signed, StoredHead: tree.Head(t, now), StoredRoot: prefix, FromNodes: true,
			ConsistencyProof: [][]byte{rfc6962.DefaultHasher.HashChildren(tree.Leaves[2].LeafHash, tree.Leaves[3].LeafHash)},
		}
	}
	forked := centraltest.NewTree("acme", one)
	forked.Add(2)
	for _, c := range []struct {
		name string
		fork verify.ForkDoc
		want verify.Kind
	}{
		{"a fork of one size", sameSize(other("acme", one, tree.Day), tree.Head(t, now)), 0},
		{"a fork against the nodes", fromNodes(forked.Head(t, now)), 0},
		{"heads of two tenants", sameSize(other("globex", one, tree.Day), tree.Head(t, now)), verify.Mismatch},
		{"heads of two appliances", sameSize(other("acme", two, tree.Day), tree.Head(t, now)), verify.Mismatch},
		{"heads of two days", sameSize(other("acme", one, yesterday), tree.Head(t, now)), verify.Mismatch},
		{"the tree's own smaller head", fromNodes(tree.HeadAt(t, 2, now)), verify.Mismatch},
		// Every tree extends the empty one, whose root is fixed: the proof
		// from it is empty and binds no stored_root.
		{"the empty tree", verify.ForkDoc{
			TenantID: "acme", ApplianceID: one.ID, Day: tree.Day, ReceivedAt: head.FormatSignedAt(now),
			SignedHead: tree.HeadAt(t, 0, now), StoredHead: tree.Head(t, now),
			StoredRoot: bytes.Repeat([]byte{7}, 32), FromNodes: true, ConsistencyProof: [][]byte{},
		}, verify.Mismatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := verify.Fork(c.fork, f.CA.Cert)
			if got := verify.KindOf(err); got != c.want || (c.want == 0 && err != nil) {
				t.Fatalf("got %v (%v), want %v", got, err, c.want)
			}
		})
	}
}
