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

	"github.com/tollgate-dev/tollgate/central/centralclient"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/ingest"
	"github.com/tollgate-dev/tollgate/central/verify"
)

var update = flag.Bool("update", false, "regenerate testdata from a live central plane")

// Golden files (testdata/), as a live central plane served them:
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
	caFile    = "testdata/fleet-ca.pem"
	headsFile = "testdata/heads.json"
	proofFile = "testdata/proof.json"
	leafFile  = "testdata/leaf.json"
	forksFile = "testdata/forks.json"
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(m.Run())
}

// TestGolden verifies the golden documents (regenerating them first with
// -update).
func TestGolden(t *testing.T) {
	if *update {
		regenerate(t)
	}
	ca, err := verify.LoadCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	heads, err := verify.HeadsDocument(read(t, headsFile), ca)
	if err != nil || len(heads) != 2 || heads[0].EventCount != 0 || heads[1].EventCount != 5 {
		t.Fatalf("heads: %v, %v", heads, err)
	}
	p, err := verify.ProofDocument(read(t, proofFile), ca, read(t, leafFile))
	if err != nil || p.LeafIndex != 2 || p.TreeSize != 5 {
		t.Fatalf("proof: %+v, %v", p, err)
	}
	forks, err := verify.ForksDocument(read(t, forksFile), ca)
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
}

func read(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func regenerate(t *testing.T) {
	p := centraltest.StartPlane(t)
	ctx := context.Background()
	if err := p.Tokens.SetAuditTokens(ctx, "acme", []string{"tga_golden_reader"}); err != nil {
		t.Fatal(err)
	}
	tree := centraltest.NewTree("acme", p.Fleet.Appliance(t, "app_golden"))
	tree.Add(5)
	empty := centraltest.NewTree("acme", p.Fleet.Appliance(t, "app_empty"))
	for _, tr := range []*centraltest.Tree{tree, empty} {
		if _, err := centraltest.Publish(ctx, p.IngestClient(t, tr.App), tr.Upload(t, 0)); err != nil {
			t.Fatal(err)
		}
	}
	write(t, caFile, p.Fleet.CA.CertPEM)
	write(t, headsFile, fetch(t, p, "/v1/tenants/acme/audit/heads?day="+tree.Day))
	write(t, proofFile, fetch(t, p, fmt.Sprintf("/v1/tenants/acme/audit/proof?appliance_id=%s&day=%s&request_id=%s",
		tree.App.ID, tree.Day, tree.Leaves[2].RequestID)))
	write(t, leafFile, tree.Canonical[2])
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
	write(t, forksFile, fetch(t, p, "/v1/tenants/acme/audit/forks"))
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

// Golden consistency documents (testdata/consistency/), as a live central
// plane served them, with a fleet CA of their own:
//
//	fleet-ca.pem      the fleet CA
//	history.json      GET .../audit/history of a tree of acme on
//	                  app_golden whose heads were of 3, 5 and 8 events
//	consistency.json  GET .../audit/consistency from 3 to 8 events
//	forked.json       consistency.json with from_head replaced by a head
//	                  of 3 other events that app_golden's key signed: a
//	                  forked pair, which no plane serves
const (
	consistencyCAFile = "testdata/consistency/fleet-ca.pem"
	historyFile       = "testdata/consistency/history.json"
	consistencyFile   = "testdata/consistency/consistency.json"
	forkedConsistency = "testdata/consistency/forked.json"
)

// TestGoldenConsistency verifies the golden consistency documents
// (regenerating them first with -update) and refuses the forked pair.
func TestGoldenConsistency(t *testing.T) {
	if *update {
		regenerateConsistency(t)
	}
	ca, err := verify.LoadCA(consistencyCAFile)
	if err != nil {
		t.Fatal(err)
	}
	heads, err := verify.HeadsDocument(read(t, historyFile), ca)
	if err != nil || len(heads) != 3 || heads[0].EventCount != 3 || heads[2].EventCount != 8 {
		t.Fatalf("history: %v, %v", heads, err)
	}
	c, err := verify.ConsistencyDocument(read(t, consistencyFile), ca)
	if err != nil || c.FromSize != 3 || c.ToSize != 8 || c.FromHead != heads[0] || c.ToHead != heads[2] || len(c.Proof) == 0 {
		t.Fatalf("consistency: %+v, %v", c, err)
	}
	if _, err := verify.ConsistencyDocument(read(t, forkedConsistency), ca); verify.KindOf(err) != verify.Inclusion {
		t.Fatalf("the forked pair: %v, want %v", err, verify.Inclusion)
	}
}

func regenerateConsistency(t *testing.T) {
	p := centraltest.StartPlane(t)
	ctx := context.Background()
	if err := p.Tokens.SetAuditTokens(ctx, "acme", []string{"tga_golden_reader"}); err != nil {
		t.Fatal(err)
	}
	tree := centraltest.NewTree("acme", p.Fleet.Appliance(t, "app_golden"))
	for _, n := range []int{3, 2, 3} {
		from := uint64(len(tree.Leaves))
		tree.Add(n)
		if _, err := centraltest.Publish(ctx, p.IngestClient(t, tree.App), tree.Upload(t, from)); err != nil {
			t.Fatal(err)
		}
	}
	q := "?appliance_id=" + tree.App.ID + "&day=" + tree.Day
	write(t, consistencyCAFile, p.Fleet.CA.CertPEM)
	write(t, historyFile, fetch(t, p, "/v1/tenants/acme/audit/history"+q))
	doc := fetch(t, p, "/v1/tenants/acme/audit/consistency"+q+"&from_size=3&to_size=8")
	write(t, consistencyFile, doc)
	c, err := verify.ParseConsistency(doc)
	if err != nil {
		t.Fatal(err)
	}
	other := centraltest.NewTree("acme", tree.App)
	other.Add(3)
	forked, _ := json.Marshal(other.Head(t, time.Now()))
	served, _ := json.Marshal(c.FromHead)
	write(t, forkedConsistency, bytes.Replace(doc, served, forked, 1))
}
