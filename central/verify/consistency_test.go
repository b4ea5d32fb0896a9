package verify_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/central/verify"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// nodeHashes returns the hashes of the nodes of tr's leaves asked for.
func nodeHashes(tr *centraltest.Tree) func([]compact.NodeID) ([][]byte, error) {
	return func(nodes []compact.NodeID) ([][]byte, error) {
		out := make([][]byte, len(nodes))
		for i, n := range nodes {
			begin, end := n.Coverage()
			out[i] = subtree(tr.Leaves[begin:end])
		}
		return out, nil
	}
}

// subtree is the hash of a complete subtree over leaves.
func subtree(leaves []store.Leaf) []byte {
	if len(leaves) == 1 {
		return leaves[0].LeafHash
	}
	half := len(leaves) / 2
	return rfc6962.DefaultHasher.HashChildren(subtree(leaves[:half]), subtree(leaves[half:]))
}

// consistencyOf is the consistency proof document between two heads of
// tr's leaves, from and to.
func consistencyOf(t *testing.T, tr *centraltest.Tree, from, to head.Head) verify.ConsistencyDoc {
	t.Helper()
	hashes, err := store.ConsistencyHashes(from.EventCount, to.EventCount, nodeHashes(tr))
	if err != nil {
		t.Fatal(err)
	}
	return verify.ConsistencyDoc{ApplianceID: from.ApplianceID, Day: from.Day, FromSize: from.EventCount, ToSize: to.EventCount,
		Proof: append([][]byte{}, hashes...), FromHead: from, ToHead: to}
}

// TestConsistencyOfSignedHeads: a consistency proof between two heads of
// one tree verifies, whatever their sizes; heads that are no two views of
// one growing tree, a proof that does not join their roots, or heads
// forked by their appliance's key do not.
func TestConsistencyOfSignedHeads(t *testing.T) {
	f := centraltest.NewFleet(t)
	app, two := f.Appliance(t, "app_one"), f.Appliance(t, "app_two")
	now := time.Now()
	tr := centraltest.NewTree("acme", app)
	tr.Add(11)
	at := func(size int) head.Head { return tr.HeadAt(t, size, now) }
	// Other views of the tree, signed by the same key: over other leaves.
	forked := centraltest.NewTree("acme", app)
	forked.Add(11)
	sameRoot := func(h head.Head, last uint64) head.Head {
		h.LastSequence = last
		s, err := head.Sign(h, app, now)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	edit := func(c verify.ConsistencyDoc, fn func(*verify.ConsistencyDoc)) verify.ConsistencyDoc {
		c.Proof = append([][]byte{}, c.Proof...)
		fn(&c)
		return c
	}
	flip := func(b []byte) []byte { b = append([]byte{}, b...); b[5] ^= 1; return b }
	good := consistencyOf(t, tr, at(5), at(11))
	otherDay := centraltest.NewTree("acme", app)
	otherDay.Day = ids.Day(now.AddDate(0, 0, -1))
	otherDay.Add(11)
	otherApp := centraltest.NewTree("acme", two)
	otherApp.Add(11)
	for _, c := range []struct {
		name string
		doc  verify.ConsistencyDoc
		want verify.Kind
	}{
		{"5 to 11", good, 0},
		{"1 to 11", consistencyOf(t, tr, at(1), at(11)), 0},
		{"4 to 8", consistencyOf(t, tr, at(4), at(8)), 0},
		{"7 to 8", consistencyOf(t, tr, at(7), at(8)), 0},
		{"the empty tree to 11", consistencyOf(t, tr, at(0), at(11)), 0},
		{"the empty tree to itself", consistencyOf(t, tr, at(0), at(0)), 0},
		{"one size, signed twice", consistencyOf(t, tr, at(5), tr.HeadAt(t, 5, now.Add(time.Second))), 0},

		// A forked pair: heads of the appliance's key whose roots no
		// proof joins.
		{"a forked smaller head", edit(good, func(c *verify.ConsistencyDoc) { c.FromHead = forked.HeadAt(t, 5, now) }), verify.Inclusion},
		{"a forked larger head", edit(good, func(c *verify.ConsistencyDoc) { c.ToHead = forked.HeadAt(t, 11, now) }), verify.Inclusion},
		{"a forked head of one size", consistencyOf(t, tr, at(5), forked.HeadAt(t, 5, now)), verify.Inclusion},
		{"a forked head of the other tree's size", edit(consistencyOf(t, forked, forked.HeadAt(t, 2, now), forked.HeadAt(t, 5, now)),
			func(c *verify.ConsistencyDoc) { c.FromHead = at(2) }), verify.Inclusion},

		// The proof.
		{"a hash changed", edit(good, func(c *verify.ConsistencyDoc) { c.Proof[0] = flip(c.Proof[0]) }), verify.Inclusion},
		{"the last hash changed", edit(good, func(c *verify.ConsistencyDoc) { c.Proof[len(c.Proof)-1] = flip(c.Proof[len(c.Proof)-1]) }), verify.Inclusion},
		{"a hash dropped", edit(good, func(c *verify.ConsistencyDoc) { c.Proof = c.Proof[1:] }), verify.Inclusion},
		{"a hash added", edit(good, func(c *verify.ConsistencyDoc) { c.Proof = append(c.Proof, c.Proof[0]) }), verify.Inclusion},
		{"no hashes", edit(good, func(c *verify.ConsistencyDoc) { c.Proof = [][]byte{} }), verify.Inclusion},
		{"hashes between heads of one size", edit(consistencyOf(t, tr, at(5), at(5)), func(c *verify.ConsistencyDoc) { c.Proof = good.Proof }), verify.Inclusion},
		{"hashes from the empty tree", edit(consistencyOf(t, tr, at(0), at(5)), func(c *verify.ConsistencyDoc) { c.Proof = good.Proof }), verify.Inclusion},
		{"another pair's proof", edit(good, func(c *verify.ConsistencyDoc) { c.Proof = consistencyOf(t, tr, at(6), at(11)).Proof }), verify.Inclusion},

		// The members and the heads.
		{"from_size", edit(good, func(c *verify.ConsistencyDoc) { c.FromSize = 4 }), verify.Mismatch},
		{"to_size", edit(good, func(c *verify.ConsistencyDoc) { c.ToSize = 12 }), verify.Mismatch},
		{"heads swapped", edit(good, func(c *verify.ConsistencyDoc) {
			c.FromHead, c.ToHead, c.FromSize, c.ToSize = c.ToHead, c.FromHead, c.ToSize, c.FromSize
		}), verify.Mismatch},
		{"appliance_id", edit(good, func(c *verify.ConsistencyDoc) { c.ApplianceID = "app_two" }), verify.Mismatch},
		{"day", edit(good, func(c *verify.ConsistencyDoc) { c.Day = otherDay.Day }), verify.Mismatch},
		{"appliance_id malformed", edit(good, func(c *verify.ConsistencyDoc) { c.ApplianceID = "one" }), verify.Malformed},
		{"day malformed", edit(good, func(c *verify.ConsistencyDoc) { c.Day = "2026-02-30" }), verify.Malformed},
		{"heads of two appliances", edit(good, func(c *verify.ConsistencyDoc) { c.ToHead = otherApp.HeadAt(t, 11, now) }), verify.Mismatch},
		{"heads of two days", edit(good, func(c *verify.ConsistencyDoc) { c.ToHead = otherDay.HeadAt(t, 11, now) }), verify.Mismatch},
		{"last_sequence not growing", consistencyOf(t, tr, at(8), sameRoot(at(11), at(8).LastSequence)), verify.Mismatch},
		{"last_sequence changed at one size", consistencyOf(t, tr, at(5), sameRoot(at(5), at(5).LastSequence+1)), verify.Mismatch},
		{"from_head's root", edit(good, func(c *verify.ConsistencyDoc) { c.FromHead.MerkleRoot = at(6).MerkleRoot }), verify.Signature},
		{"to_head's event_count", edit(good, func(c *verify.ConsistencyDoc) { c.ToHead.EventCount, c.ToSize = 10, 10 }), verify.Signature},
		{"from_head of another fleet", edit(good, func(c *verify.ConsistencyDoc) {
			c.FromHead.Certificate = string(centraltest.NewFleet(t).Appliance(t, "app_one").CertPEM)
		}), verify.Certificate},
		{"to_head of another appliance's certificate", edit(good, func(c *verify.ConsistencyDoc) { c.ToHead.Certificate = string(two.CertPEM) }), verify.Appliance},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := verify.Consistency(c.doc, f.CA.Cert)
			if got := verify.KindOf(err); got != c.want || (c.want == 0 && err != nil) {
				t.Fatalf("got %v (%v), want %v", got, err, c.want)
			}
		})
	}
}

var consistencyKeys = []string{"appliance_id", "day", "from_size", "to_size", "consistency_proof", "from_head", "to_head"}

// setMember returns the consistency document with members replaced by
// raw JSON ("from_head.x" and "to_head.x" inside a head), laid out as
// served.
func setMember(t *testing.T, doc []byte, set ...[2]string) []byte {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(doc, &top); err != nil {
		t.Fatal(err)
	}
	for _, s := range set {
		if h, name, ok := strings.Cut(s[0], "."); ok {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(top[h], &m); err != nil {
				t.Fatal(err)
			}
			m[name] = json.RawMessage(s[1])
			top[h] = ordered(m, headKeys)
		} else {
			top[s[0]] = json.RawMessage(s[1])
		}
	}
	return ordered(top, consistencyKeys)
}

// rawMember is the raw JSON of a member ("from_head.x" inside a head).
func rawMember(t *testing.T, doc []byte, name string) string {
	t.Helper()
	var top map[string]json.RawMessage
	_ = json.Unmarshal(doc, &top)
	if h, n, ok := strings.Cut(name, "."); ok {
		var m map[string]json.RawMessage
		_ = json.Unmarshal(top[h], &m)
		return string(m[n])
	}
	return string(top[name])
}

// TestTamperedConsistency: the golden consistency proof, with each of its
// members changed, fails with the kind of the first check it breaks.
func TestTamperedConsistency(t *testing.T) {
	ca, err := verify.LoadCA(consistencyCAFile)
	if err != nil {
		t.Fatal(err)
	}
	doc := read(t, consistencyFile)
	var hashes []string
	if err := json.Unmarshal([]byte(rawMember(t, doc, "consistency_proof")), &hashes); err != nil || len(hashes) < 2 {
		t.Fatalf("consistency_proof: %v", err)
	}
	var history struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(read(t, historyFile), &history); err != nil {
		t.Fatal(err)
	}
	middle := string(history.Data[1]) // the head of 5 events
	mustJSON := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	type kv = [2]string
	for _, c := range []struct {
		name string
		doc  []byte
		want verify.Kind
	}{
		{"as served, laid out again", setMember(t, doc), 0},
		{"the forked pair", read(t, forkedConsistency), verify.Inclusion},

		// The proof.
		{"a hash", setMember(t, doc, kv{"consistency_proof", mustJSON(append([]string{flip(quote(hashes[0]), 3)[1:65]}, hashes[1:]...))}), verify.Inclusion},
		{"hashes swapped", setMember(t, doc, kv{"consistency_proof", mustJSON(append([]string{hashes[1], hashes[0]}, hashes[2:]...))}), verify.Inclusion},
		{"a hash dropped", setMember(t, doc, kv{"consistency_proof", mustJSON(hashes[1:])}), verify.Inclusion},
		{"a hash added", setMember(t, doc, kv{"consistency_proof", mustJSON(append(hashes, hashes[0]))}), verify.Inclusion},
		{"no hashes", setMember(t, doc, kv{"consistency_proof", `[]`}), verify.Inclusion},
		{"from_head of 5 events", setMember(t, doc, kv{"from_head", middle}, kv{"from_size", `5`}), verify.Inclusion},
		{"to_head of 5 events", setMember(t, doc, kv{"to_head", middle}, kv{"to_size", `5`}), verify.Inclusion},
		{"the heads one", setMember(t, doc, kv{"from_head", rawMember(t, doc, "to_head")}, kv{"from_size", `8`}), verify.Inclusion},

		// The members that name the heads.
		{"from_size", setMember(t, doc, kv{"from_size", `2`}), verify.Mismatch},
		{"to_size", setMember(t, doc, kv{"to_size", `9`}), verify.Mismatch},
		{"heads swapped", setMember(t, doc, kv{"from_head", rawMember(t, doc, "to_head")}, kv{"to_head", rawMember(t, doc, "from_head")},
			kv{"from_size", `8`}, kv{"to_size", `3`}), verify.Mismatch},
		{"appliance_id", setMember(t, doc, kv{"appliance_id", `"app_goldex"`}), verify.Mismatch},
		{"day", setMember(t, doc, kv{"day", `"2020-01-01"`}), verify.Mismatch},
		{"appliance_id malformed", setMember(t, doc, kv{"appliance_id", `"golden"`}), verify.Malformed},
		{"day not in the calendar", setMember(t, doc, kv{"day", `"2026-02-30"`}), verify.Malformed},

		// The heads.
		{"from_head.event_count", setMember(t, doc, kv{"from_head.event_count", `4`}, kv{"from_size", `4`}), verify.Signature},
		{"to_head.merkle_root", setMember(t, doc, kv{"to_head.merkle_root", flip(rawMember(t, doc, "to_head.merkle_root"), 9)}), verify.Signature},
		{"from_head.tenant_id", setMember(t, doc, kv{"from_head.tenant_id", `"acmf"`}), verify.Signature},
		{"to_head.signature of the other head", setMember(t, doc, kv{"to_head.signature", rawMember(t, doc, "from_head.signature")}), verify.Signature},
		{"from_head.appliance_id", setMember(t, doc, kv{"from_head.appliance_id", `"app_goldex"`}), verify.Appliance},
		{"to_head.signed_at after the certificate", setMember(t, doc, kv{"to_head.signed_at", `"2099-01-01T00:00:00Z"`}), verify.Certificate},

		// Documents that are not strict.
		{"unknown member", bytes.Replace(doc, []byte(`{"appliance_id"`), []byte(`{"x":1,"appliance_id"`), 1), verify.Malformed},
		{"member twice", bytes.Replace(doc, []byte(`{"appliance_id"`), []byte(`{"to_size":8,"appliance_id"`), 1), verify.Malformed},
		{"member missing", bytes.Replace(doc, []byte(`"to_size":8,`), nil, 1), verify.Malformed},
		{"size as string", setMember(t, doc, kv{"from_size", `"3"`}), verify.Malformed},
		{"size with fraction", setMember(t, doc, kv{"to_size", `8.0`}), verify.Malformed},
		{"uppercase hex", setMember(t, doc, kv{"consistency_proof", strings.ToUpper(rawMember(t, doc, "consistency_proof"))}), verify.Malformed},
		{"65 hashes", setMember(t, doc, kv{"consistency_proof", mustJSON(slices.Repeat(hashes[:1], 65))}), verify.Malformed},
		{"consistency_proof not a list", setMember(t, doc, kv{"consistency_proof", `null`}), verify.Malformed},
		{"a proof document", read(t, proofFile), verify.Malformed},
		{"a heads document", read(t, historyFile), verify.Malformed},
		{"trailing data", append(append([]byte{}, doc...), `{}`...), verify.Malformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := verify.ConsistencyDocument(c.doc, ca)
			if got := verify.KindOf(err); got != c.want || (c.want == 0 && err != nil) {
				t.Fatalf("got %v (%v), want %v", got, err, c.want)
			}
		})
	}
}

// TestEveryByteOfConsistency: changing any one byte of the served
// consistency proof, to any of three other values, makes verification
// fail.
func TestEveryByteOfConsistency(t *testing.T) {
	ca, err := verify.LoadCA(consistencyCAFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file  string
		check func([]byte) error
	}{
		{consistencyFile, func(b []byte) error { _, err := verify.ConsistencyDocument(b, ca); return err }},
		{historyFile, func(b []byte) error { _, err := verify.HeadsDocument(b, ca); return err }},
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
