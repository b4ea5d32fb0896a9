package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/verify.golden")

// The golden documents of central/verify, as a live central plane served
// them.
const (
	goldenDir = "../../central/verify/testdata"
	goldenOut = "testdata/verify.golden"
)

// TestVerifyGolden runs `tollgate verify` on the golden documents and on
// tampered copies, and compares exit codes and verdicts with
// testdata/verify.golden.
func TestVerifyGolden(t *testing.T) {
	ca := filepath.Join(goldenDir, "fleet-ca.pem")
	proof, err := os.ReadFile(filepath.Join(goldenDir, "proof.json"))
	if err != nil {
		t.Fatal(err)
	}
	forks, err := os.ReadFile(filepath.Join(goldenDir, "forks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fdoc struct {
		Data []struct {
			StoredRoot       string   `json:"stored_root"`
			ConsistencyProof []string `json:"consistency_proof"`
		} `json:"data"`
	}
	if err := json.Unmarshal(forks, &fdoc); err != nil || len(fdoc.Data) != 2 || len(fdoc.Data[1].ConsistencyProof) == 0 {
		t.Fatalf("forks.json: %v", err)
	}
	cca := filepath.Join(goldenDir, "consistency", "fleet-ca.pem")
	consistency, err := os.ReadFile(filepath.Join(goldenDir, "consistency", "consistency.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cdoc struct {
		Proof []string `json:"consistency_proof"`
	}
	if err := json.Unmarshal(consistency, &cdoc); err != nil || len(cdoc.Proof) == 0 {
		t.Fatalf("consistency.json: %v", err)
	}
	dir := t.TempDir()
	tamperDoc := func(doc []byte, name, old, new string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.Replace(doc, []byte(old), []byte(new), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tamper := func(name, old, new string) string { return tamperDoc(proof, name, old, new) }
	hash := fdoc.Data[1].ConsistencyProof[0]
	otherHash := strings.Repeat("0", 63) + "1"
	g := func(f string) string { return filepath.Join(goldenDir, f) }
	leafMember := string(proof[bytes.Index(proof, []byte(`,"leaf":"`)) : len(proof)-1])
	cases := []struct {
		name string
		args []string
	}{
		{"heads", []string{"verify", "head", g("heads.json"), "--ca", ca}},
		{"proof with its leaf", []string{"verify", "proof", g("proof.json"), "--ca", ca, "--leaf", g("leaf.json")}},
		{"proof, flags first", []string{"verify", "--ca", ca, "proof", g("proof.json")}},
		{"proof as a head", []string{"verify", "head", g("proof.json"), "--ca", ca}},
		{"tree_size", []string{"verify", "proof", tamper("size.json", `"tree_size":5`, `"tree_size":6`), "--ca", ca}},
		{"leaf_index", []string{"verify", "proof", tamper("index.json", `"leaf_index":2`, `"leaf_index":3`), "--ca", ca}},
		{"event_count", []string{"verify", "proof", tamper("count.json", `"event_count":5`, `"event_count":4`), "--ca", ca}},
		{"tenant_id", []string{"verify", "proof", tamper("tenant.json", `"tenant_id":"acme"`, `"tenant_id":"acmf"`), "--ca", ca}},
		{"appliance_id", []string{"verify", "proof", tamper("app.json", `"tenant_id":"acme","appliance_id":"app_golden"`, `"tenant_id":"acme","appliance_id":"app_goldex"`), "--ca", ca}},
		{"unknown member", []string{"verify", "proof", tamper("member.json", `{"appliance_id"`, `{"extra":true,"appliance_id"`), "--ca", ca}},
		{"leaf of another event", []string{"verify", "proof", tamper("seq.json", `"sequence":6`, `"sequence":8`), "--ca", ca, "--leaf", g("leaf.json")}},
		{"request_id", []string{"verify", "proof", tamper("req.json", `"request_id":"req_`, `"request_id":"req_0`), "--ca", ca}},
		{"proof without its leaf", []string{"verify", "proof", tamper("noleaf.json", leafMember, `,"leaf":""`), "--ca", ca}},
		{"proof without its leaf, given", []string{"verify", "proof", tamper("noleaf.json", leafMember, `,"leaf":""`), "--ca", ca, "--leaf", g("leaf.json")}},
		{"proof's leaf changed", []string{"verify", "proof", tamper("leafbyte.json", `\"status\":200`, `\"status\":201`), "--ca", ca}},
		{"CA is not a CA", []string{"verify", "head", g("heads.json"), "--ca", g("leaf.json")}},
		{"no CA", []string{"verify", "head", g("heads.json")}},
		{"leaf with head", []string{"verify", "head", g("heads.json"), "--ca", ca, "--leaf", g("leaf.json")}},
		{"forks", []string{"verify", "fork", g("forks.json"), "--ca", ca}},
		{"forks as heads", []string{"verify", "head", g("forks.json"), "--ca", ca}},
		{"heads as forks", []string{"verify", "fork", g("heads.json"), "--ca", ca}},
		{"consistency_proof hash", []string{"verify", "fork", tamperDoc(forks, "fork-proof.json", `"`+hash+`"`, `"`+otherHash+`"`), "--ca", ca}},
		{"stored_root", []string{"verify", "fork", tamperDoc(forks, "fork-root.json", `"stored_root":"`+fdoc.Data[0].StoredRoot, `"stored_root":"`+otherHash), "--ca", ca}},
		{"stored_root_from_nodes", []string{"verify", "fork", tamperDoc(forks, "fork-nodes.json", `"stored_root_from_nodes":true`, `"stored_root_from_nodes":false`), "--ca", ca}},
		{"fork event_count", []string{"verify", "fork", tamperDoc(forks, "fork-count.json", `"event_count":2`, `"event_count":3`), "--ca", ca}},
		{"leaf with fork", []string{"verify", "fork", g("forks.json"), "--ca", ca, "--leaf", g("leaf.json")}},
		{"history", []string{"verify", "head", g("consistency/history.json"), "--ca", cca}},
		{"consistency", []string{"verify", "consistency", g("consistency/consistency.json"), "--ca", cca}},
		{"consistency, forked pair", []string{"verify", "consistency", g("consistency/forked.json"), "--ca", cca}},
		{"consistency to_size", []string{"verify", "consistency", tamperDoc(consistency, "to-size.json", `"to_size":8`, `"to_size":9`), "--ca", cca}},
		{"consistency hash", []string{"verify", "consistency", tamperDoc(consistency, "c-hash.json", `"`+cdoc.Proof[0]+`"`, `"`+otherHash+`"`), "--ca", cca}},
		{"consistency of another fleet", []string{"verify", "consistency", g("consistency/consistency.json"), "--ca", ca}},
		{"proof as consistency", []string{"verify", "consistency", g("proof.json"), "--ca", ca}},
		{"leaf with consistency", []string{"verify", "consistency", g("consistency/consistency.json"), "--ca", cca, "--leaf", g("leaf.json")}},
	}
	var got strings.Builder
	for _, c := range cases {
		var out, errOut bytes.Buffer
		code := run(context.Background(), c.args, &out, &errOut)
		fmt.Fprintf(&got, "## %s\nexit %d\n%s", c.name, code, out.String())
		if code != 0 && code != 2 && (strings.Count(out.String(), "\n") != 1 || errOut.Len() != 0) {
			t.Errorf("%s: want one verdict line and nothing on stderr, got %q, %q", c.name, out.String(), errOut.String())
		}
	}
	if *updateGolden {
		if err := os.WriteFile(goldenOut, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenOut)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Fatalf("verdicts differ from %s (run with -update after checking):\n%s", goldenOut, got.String())
	}
}

// TestVerifyStdin: FILE "-" reads the document from standard input.
func TestVerifyStdin(t *testing.T) {
	ca := filepath.Join(goldenDir, "fleet-ca.pem")
	proof, err := os.ReadFile(filepath.Join(goldenDir, "proof.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer func(r io.Reader) { stdin = r }(stdin)
	for _, c := range []struct {
		name, doc string
		code      int
		verdict   string
	}{
		{"proof", string(proof), 0, `"ok":true,"document":"proof"`},
		{"tampered proof", strings.Replace(string(proof), `"tree_size":5`, `"tree_size":4`, 1), 10, `"error":"proof_mismatch"`},
		{"empty input", "", 4, `"error":"malformed"`},
	} {
		stdin = strings.NewReader(c.doc)
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"verify", "proof", "-", "--ca", ca}, &out, &errOut)
		if code != c.code || !strings.Contains(out.String(), c.verdict) || strings.Count(out.String(), "\n") != 1 {
			t.Errorf("%s: exit %d, %q; want %d with %s", c.name, code, out.String(), c.code, c.verdict)
		}
	}
}
