package verify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/central/centralclient"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/ingest"
	"github.com/tollgate-dev/tollgate/central/verify"
)

var update = flag.Bool("update", false, "regenerate testdata from a live central plane")

// Golden files, as a live central plane served them, in testdata/ from
// ECDSA P-256 appliances (as appliances issued before Ed25519 keys sign)
// and in testdata/ed25519/ from Ed25519 appliances, each set with a fleet
// CA of its own:
//
//	fleet-ca.pem  the fleet CA
//	heads.json    GET .../audit/heads: a tree of 5 events on app_golden and
//	              an empty tree on app_empty (first: by appliance id)
//	proof.json    GET .../audit/proof of the third event
//	leaf.json     that event's canonical leaf
//	forks.json    GET .../audit/forks after app_golden signed two other
//	              views of its tree: of its 5 events (a fork of one size)
//	              and of 2 (against the root rebuilt from the stored nodes,
//	              with a consistency proof)
const (
	caName    = "fleet-ca.pem"
	headsName = "heads.json"
	proofName = "proof.json"
	leafName  = "leaf.json"
	forksName = "forks.json"

	// The ECDSA P-256 set, also the fuzz tests' seeds.
	caFile    = "testdata/" + caName
	headsFile = "testdata/" + headsName
	proofFile = "testdata/" + proofName
	leafFile  = "testdata/" + leafName
	forksFile = "testdata/" + forksName
)

// goldenSet is a directory of golden files and the key kind of the
// appliances that signed them.
type goldenSet struct {
	dir  string
	kind fleet.KeyKind
}

var goldenSets = []goldenSet{{"testdata", fleet.ECDSAP256}, {"testdata/ed25519", fleet.Ed25519}}

func (g goldenSet) file(name string) string { return g.dir + "/" + name }

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(m.Run())
}

// TestGolden verifies the golden documents of each set (regenerating them
// first with -update).
func TestGolden(t *testing.T) {
	for _, g := range goldenSets {
		t.Run(string(g.kind), func(t *testing.T) { testGolden(t, g) })
	}
}

func testGolden(t *testing.T, g goldenSet) {
	if *update {
		regenerate(t, g)
	}
	ca, err := verify.LoadCA(g.file(caName))
	if err != nil {
		t.Fatal(err)
	}
	heads, err := verify.HeadsDocument(read(t, g.file(headsName)), ca)
	if err != nil || len(heads) != 2 || heads[0].EventCount != 0 || heads[1].EventCount != 5 {
		t.Fatalf("heads: %v, %v", heads, err)
	}
	p, err := verify.ProofDocument(read(t, g.file(proofName)), ca, read(t, g.file(leafName)))
	if err != nil || p.LeafIndex != 2 || p.TreeSize != 5 {
		t.Fatalf("proof: %+v, %v", p, err)
	}
	forks, err := verify.ForksDocument(read(t, g.file(forksName)), ca)
	if err != nil || len(forks) != 2 {
		t.Fatalf("forks: %d, %v; want 2", len(forks), err)
	}
	for i, want := range []struct {
		signed    uint64
		fromNodes bool
	}{{5, false}, {2, true}} {
		if f := forks[i]; f.SignedHead.EventCount != want.signed || f.StoredHead.EventCount != 5 || f.FromNodes != want.fromNodes ||
			(len(f.ConsistencyProof) != 0) != want.fromNodes {
			t.Fatalf("fork %d: %d events against %d, from nodes %t, %d hashes; want %d, from nodes %t",
				i, f.SignedHead.EventCount, f.StoredHead.EventCount, f.FromNodes, len(f.ConsistencyProof), want.signed, want.fromNodes)
		}
	}
	for _, h := range heads {
		if cert, _ := fleet.ParseCertificatePEM([]byte(h.Certificate)); cert == nil {
			t.Fatalf("head of %s: no certificate", h.ApplianceID)
		} else if kind, _ := fleet.KindOf(cert.PublicKey); kind != g.kind {
			t.Fatalf("head of %s signed with a %s key, want %s", h.ApplianceID, kind, g.kind)
		}
	}
}

func read(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func regenerate(t *testing.T, g goldenSet) {
	p := centraltest.StartPlane(t)
	ctx := context.Background()
	if err := p.Tokens.SetAuditTokens(ctx, "acme", []string{"tga_golden_reader"}); err != nil {
		t.Fatal(err)
	}
	tree := centraltest.NewTree("acme", p.Fleet.ApplianceKind(t, "app_golden", g.kind))
	tree.Add(5)
	empty := centraltest.NewTree("acme", p.Fleet.ApplianceKind(t, "app_empty", g.kind))
	for _, tr := range []*centraltest.Tree{tree, empty} {
		if _, err := centraltest.Publish(ctx, p.IngestClient(t, tr.App), tr.Upload(t, 0)); err != nil {
			t.Fatal(err)
		}
	}
	write(t, g.file(caName), p.Fleet.CA.CertPEM)
	write(t, g.file(headsName), fetch(t, p, "/v1/tenants/acme/audit/heads?day="+tree.Day))
	write(t, g.file(proofName), fetch(t, p, fmt.Sprintf("/v1/tenants/acme/audit/proof?appliance_id=%s&day=%s&request_id=%s",
		tree.App.ID, tree.Day, tree.Leaves[2].RequestID)))
	write(t, g.file(leafName), tree.Canonical[2])
	// Two other views of app_golden's tree, which the plane refuses as
	// forks and keeps.
	for _, size := range []int{5, 2} {
		fork := centraltest.NewTree("acme", tree.App)
		fork.Day = tree.Day
		fork.Add(size)
		h := fork.Head(t, time.Now())
		_, err := centraltest.Publish(ctx, p.IngestClient(t, tree.App), ingest.Upload{Head: h, FirstLeafIndex: h.EventCount, LeafRetentionDays: 90})
		if reason, _, _ := centralclient.RefusalOf(err); reason != ingest.ReasonInconsistent {
			t.Fatalf("a fork of %d events: %v, want inconsistent", size, err)
		}
	}
	write(t, g.file(forksName), fetch(t, p, "/v1/tenants/acme/audit/forks"))
}

func fetch(t *testing.T, p *centraltest.Plane, path string) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, p.BaseURL+path, nil)
	req.Header.Set("Authorization", "Bearer tga_golden_reader")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s %v", path, resp.StatusCode, b, err)
	}
	return b
}

func write(t *testing.T, file string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.FromSlash(file), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Golden consistency documents (consistency/ in each golden set), as a
// live central plane served them, with a fleet CA of their own:
//
//	fleet-ca.pem      the fleet CA
//	history.json      GET .../audit/history of a tree of acme on
//	                  app_golden whose heads were of 3, 5 and 8 events
//	consistency.json  GET .../audit/consistency from 3 to 8 events
//	forked.json       consistency.json with from_head replaced by a head
//	                  of 3 other events that app_golden's key signed: a
//	                  forked pair, which no plane serves
const (
	consistencyCAName = "consistency/fleet-ca.pem"
	historyName       = "consistency/history.json"
	consistencyName   = "consistency/consistency.json"
	forkedName        = "consistency/forked.json"

	// The ECDSA P-256 set's, which other tests read.
	consistencyCAFile = "testdata/" + consistencyCAName
	historyFile       = "testdata/" + historyName
	consistencyFile   = "testdata/" + consistencyName
	forkedConsistency = "testdata/" + forkedName
)

// TestGoldenConsistency verifies the golden consistency documents of each
// set (regenerating them first with -update) and refuses the forked pair.
func TestGoldenConsistency(t *testing.T) {
	for _, g := range goldenSets {
		t.Run(string(g.kind), func(t *testing.T) { testGoldenConsistency(t, g) })
	}
}

func testGoldenConsistency(t *testing.T, g goldenSet) {
	if *update {
		regenerateConsistency(t, g)
	}
	ca, err := verify.LoadCA(g.file(consistencyCAName))
	if err != nil {
		t.Fatal(err)
	}
	heads, err := verify.HeadsDocument(read(t, g.file(historyName)), ca)
	if err != nil || len(heads) != 3 || heads[0].EventCount != 3 || heads[2].EventCount != 8 {
		t.Fatalf("history: %v, %v", heads, err)
	}
	c, err := verify.ConsistencyDocument(read(t, g.file(consistencyName)), ca)
	if err != nil || c.FromSize != 3 || c.ToSize != 8 || c.FromHead != heads[0] || c.ToHead != heads[2] || len(c.Proof) == 0 {
		t.Fatalf("consistency: %+v, %v", c, err)
	}
	if _, err := verify.ConsistencyDocument(read(t, g.file(forkedName)), ca); verify.KindOf(err) != verify.Inclusion {
		t.Fatalf("the forked pair: %v, want %v", err, verify.Inclusion)
	}
}

func regenerateConsistency(t *testing.T, g goldenSet) {
	p := centraltest.StartPlane(t)
	ctx := context.Background()
	if err := p.Tokens.SetAuditTokens(ctx, "acme", []string{"tga_golden_reader"}); err != nil {
		t.Fatal(err)
	}
	tree := centraltest.NewTree("acme", p.Fleet.ApplianceKind(t, "app_golden", g.kind))
	for _, n := range []int{3, 2, 3} {
		from := uint64(len(tree.Leaves))
		tree.Add(n)
		if _, err := centraltest.Publish(ctx, p.IngestClient(t, tree.App), tree.Upload(t, from)); err != nil {
			t.Fatal(err)
		}
	}
	q := "?appliance_id=" + tree.App.ID + "&day=" + tree.Day
	write(t, g.file(consistencyCAName), p.Fleet.CA.CertPEM)
	write(t, g.file(historyName), fetch(t, p, "/v1/tenants/acme/audit/history"+q))
	doc := fetch(t, p, "/v1/tenants/acme/audit/consistency"+q+"&from_size=3&to_size=8")
	write(t, g.file(consistencyName), doc)
	c, err := verify.ParseConsistency(doc)
	if err != nil {
		t.Fatal(err)
	}
	other := centraltest.NewTree("acme", tree.App)
	other.Add(3)
	forked, _ := json.Marshal(other.Head(t, time.Now()))
	served, _ := json.Marshal(c.FromHead)
	write(t, g.file(forkedName), bytes.Replace(doc, served, forked, 1))
}
