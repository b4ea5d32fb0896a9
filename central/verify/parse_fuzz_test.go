package verify_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/audit/leaf"
	"github.com/tollgate-dev/tollgate/audit/receipt"
	"github.com/tollgate-dev/tollgate/central/verify"
)

// The parsers of `tollgate verify` under arbitrary documents: a strict
// parse never panics, and a document that does not parse is Malformed;
// verifying an arbitrary document (against the golden fleet CA) never
// panics and fails with a classified error; a document that parses and
// has an encoder (heads, receipts) re-encodes to one that parses equal.
// Seeds: the golden documents a live central plane served (testdata/),
// and testdata/fuzz/<target>/.

func goldenCA(f *testing.F) *x509.Certificate {
	ca, err := verify.LoadCA(caFile)
	if err != nil {
		f.Fatal(err)
	}
	return ca
}

func readTB(tb testing.TB, file string) []byte {
	tb.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func addFiles(f *testing.F, files ...string) {
	for _, name := range files {
		f.Add(readTB(f, name))
	}
}

// classified: err is nil or a verification error of a known kind, and
// a parse failure is Malformed.
func classified(t *testing.T, err error, parse bool) {
	t.Helper()
	if err == nil {
		return
	}
	k := verify.KindOf(err)
	if k < verify.Input || k > verify.LeafMismatch {
		t.Fatalf("unclassified error: %v", err)
	}
	if parse && k != verify.Malformed {
		t.Fatalf("a parse failed with kind %s: %v", k, err)
	}
}

func FuzzParseHeads(f *testing.F) {
	addFiles(f, headsFile, "testdata/consistency/history.json", proofFile, forksFile)
	f.Add([]byte(`{"data":[],"next_page_token":"x"}`))
	f.Add([]byte(`{"data":[],"next_from":18446744073709551615}`))
	ca := goldenCA(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		heads, err := verify.ParseHeads(data)
		classified(t, err, true)
		if err == nil {
			// Each head alone, and the list of them, as the audit API
			// writes them, parse to the same heads.
			for _, h := range heads {
				one, err := json.Marshal(h)
				if err != nil {
					t.Fatal(err)
				}
				back, err := verify.ParseHeads(one)
				if err != nil || len(back) != 1 || back[0] != h {
					t.Fatalf("head %+v re-encoded as %s parses to %+v, %v", h, one, back, err)
				}
			}
			list, err := json.Marshal(map[string][]head.Head{"data": heads})
			if err != nil {
				t.Fatal(err)
			}
			back, err := verify.ParseHeads(list)
			if err != nil || !reflect.DeepEqual(back, heads) && len(heads) > 0 {
				t.Fatalf("heads re-encoded as %s parse to %+v, %v", list, back, err)
			}
		}
		_, err = verify.HeadsDocument(data, ca)
		classified(t, err, false)
	})
}

func FuzzParseProof(f *testing.F) {
	addFiles(f, proofFile, headsFile)
	ca := goldenCA(f)
	leafBytes := readTB(f, leafFile)
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := verify.ParseProof(data)
		classified(t, err, true)
		_, err = verify.ProofDocument(data, ca, nil)
		classified(t, err, false)
		_, err = verify.ProofDocument(data, ca, leafBytes)
		classified(t, err, false)
	})
}

// FuzzProofLeaf: the canonical leaf given with --leaf, arbitrary, against
// the golden proof.
func FuzzProofLeaf(f *testing.F) {
	addFiles(f, leafFile)
	f.Add([]byte(`{}`))
	ca := goldenCA(f)
	proof := readTB(f, proofFile)
	want, err := verify.ProofDocument(proof, ca, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, leafBytes []byte) {
		l, perr := leaf.Parse(leafBytes)
		if perr == nil {
			// Parse takes only canonical bytes: they are what the leaf
			// encodes to.
			canon, err := leaf.Canonical(l)
			if err != nil || string(canon) != string(leafBytes) {
				t.Fatalf("leaf.Parse took %q, whose canonical form is %q (%v)", leafBytes, canon, err)
			}
		}
		p, err := verify.ProofDocument(proof, ca, leafBytes)
		classified(t, err, false)
		if err == nil && (perr != nil || !reflect.DeepEqual(p, want)) {
			t.Fatalf("the proof is bound to %q, which leaf.Parse refuses (%v)", leafBytes, perr)
		}
	})
}

func FuzzParseForks(f *testing.F) {
	addFiles(f, forksFile, headsFile)
	ca := goldenCA(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := verify.ParseForks(data)
		classified(t, err, true)
		_, err = verify.ForksDocument(data, ca)
		classified(t, err, false)
	})
}

func FuzzParseConsistency(f *testing.F) {
	addFiles(f, "testdata/consistency/consistency.json", "testdata/consistency/forked.json")
	ca, err := verify.LoadCA("testdata/consistency/fleet-ca.pem")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := verify.ParseConsistency(data)
		classified(t, err, true)
		_, err = verify.ConsistencyDocument(data, ca)
		classified(t, err, false)
	})
}

// fuzzReceipts signs a batch of two claims with a new fleet CA and
// returns the CA and the receipts' JSON and header values.
func fuzzReceipts(f *testing.F) (*x509.Certificate, [][]byte) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ca, err := fleet.NewCA("fuzz fleet CA", at.AddDate(0, -1, 0))
	if err != nil {
		f.Fatal(err)
	}
	ca.Now = func() time.Time { return at.AddDate(0, -1, 0) }
	certPEM, keyPEM, err := fleet.IssueAppliance(ca, "app_fuzz")
	if err != nil {
		f.Fatal(err)
	}
	app, err := fleet.ParseAppliance(certPEM, keyPEM)
	if err != nil {
		f.Fatal(err)
	}
	claims := []receipt.Claim{
		{RequestID: "req_fuzz1", TenantID: "acme", ApplianceID: "app_fuzz", Day: "2026-03-01", Sequence: 7, LeafIndex: 2,
			Time: "2026-03-01T11:59:59.250000Z", LeafHash: make([]byte, 32)},
		{RequestID: "req_fuzz2", TenantID: "globex", ApplianceID: "app_fuzz", Day: "2026-03-01", Sequence: 8, LeafIndex: 0,
			Time: "2026-03-01T11:59:59.500000Z", LeafHash: append(make([]byte, 31), 1)},
	}
	leaves := make([][]byte, len(claims))
	for i, c := range claims {
		leaves[i] = c.Hash()
	}
	tree := receipt.NewTree(leaves)
	signed, err := receipt.Sign(receipt.Statement{Day: "2026-03-01", FirstSequence: 7, Size: tree.Size(), Root: tree.Root()}, app, at)
	if err != nil {
		f.Fatal(err)
	}
	batch := receipt.NewBatch(tree, signed)
	var docs [][]byte
	for i, c := range claims {
		r := batch.Receipt(c, uint64(i))
		docs = append(docs, r.AppendJSON(nil), []byte(batch.Header(&r)))
	}
	return ca.Cert, docs
}

func FuzzParseReceipt(f *testing.F) {
	ca, docs := fuzzReceipts(f)
	for _, d := range docs {
		f.Add(d)
	}
	f.Add([]byte(base64.RawURLEncoding.EncodeToString([]byte(`{"schema":1}`))))
	// The receipts signed above verify: a failure below is the input's.
	if _, err := verify.ReceiptDocument(docs[0], ca); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := verify.ParseReceipt(data)
		classified(t, err, true)
		if err == nil {
			doc := r.AppendJSON(nil)
			back, err := verify.ParseReceipt(doc)
			if err != nil || !reflect.DeepEqual(back, r) {
				t.Fatalf("receipt %+v re-encoded as %s parses to %+v, %v", r, doc, back, err)
			}
			var enc receipt.HeaderEncoder
			back, err = verify.ParseReceipt([]byte(enc.Value(&r)))
			if err != nil || !reflect.DeepEqual(back, r) {
				t.Fatalf("receipt %+v as a header value parses to %+v, %v", r, back, err)
			}
		}
		_, err = verify.ReceiptDocument(data, ca)
		classified(t, err, false)
	})
}
