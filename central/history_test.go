package central_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/apierr"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/ingest"
	"github.com/tollgate-dev/tollgate/central/service"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/central/verify"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
	"github.com/tollgate-dev/tollgate/internal/ids"
	"github.com/tollgate-dev/tollgate/internal/webtest"
)

// history is a plane holding a tree of acme on app_one, of yesterday,
// whose appliance published heads of 2, 5 and 9 events and the day's
// final head, of 9 too.
type history struct {
	plane *centraltest.Plane
	tree  *centraltest.Tree
	heads []head.Head // as stored, oldest first
}

func newHistory(t *testing.T) *history {
	t.Helper()
	p := centraltest.StartPlane(t)
	ctx := context.Background()
	for tenant, tok := range map[string]string{"acme": acmeToken, "globex": globexToken} {
		if err := p.Tokens.SetAuditTokens(ctx, tenant, []string{tok}); err != nil {
			t.Fatal(err)
		}
	}
	tr := centraltest.NewTree("acme", p.Fleet.Appliance(t, "app_one"))
	yesterday := time.Now().UTC().AddDate(0, 0, -1)
	tr.Day = ids.Day(yesterday)
	end, _ := ids.DayEnd(tr.Day)
	noon := end.Add(-12 * time.Hour)
	tr.Add(9)
	h := &history{plane: p, tree: tr}
	prev := 0
	for i, size := range []int{2, 5, 9, 9} {
		at := noon.Add(time.Duration(i) * time.Minute)
		if i == 3 {
			at = end.Add(time.Second) // the day's final head
		}
		u := ingest.Upload{Head: tr.HeadAt(t, size, at), FirstLeafIndex: uint64(prev),
			Leaves: append([]store.Leaf(nil), tr.Leaves[prev:size]...), LeafRetentionDays: 90}
		if res, err := centraltest.Publish(ctx, p.IngestClient(t, tr.App), u); err != nil || res.GetDuplicate() {
			t.Fatalf("publish the head of %d events: %v, %v", size, res, err)
		}
		h.heads = append(h.heads, u.Head)
		prev = size
	}
	if !h.heads[3].Final() || h.heads[2].Final() {
		t.Fatal("the last head is to be the day's final head, and only it")
	}
	return h
}

func (h *history) get(t *testing.T, path, token string) (int, []byte) {
	t.Helper()
	st, _, body := webtest.Get(t, h.plane.BaseURL+path, token)
	return st, body
}

func headsJSON(hs []head.Head) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = headJSON(h)
	}
	return strings.Join(parts, ",")
}

// TestTreeHistory: GET .../audit/history lists every stored head of a
// tree, oldest first, the day's final head too, in pages of page_size
// from a head number, with next_from while more follow; `tollgate verify
// head` takes a page.
func TestTreeHistory(t *testing.T) {
	h := newHistory(t)
	base := fmt.Sprintf("/v1/tenants/acme/audit/history?appliance_id=app_one&day=%s", h.tree.Day)
	for _, c := range []struct {
		query string
		want  string
	}{
		{"", `{"data":[` + headsJSON(h.heads) + `]}`},
		{"&page_size=4", `{"data":[` + headsJSON(h.heads) + `]}`},
		{"&page_size=3", `{"data":[` + headsJSON(h.heads[:3]) + `],"next_from":3}`},
		{"&from=3&page_size=3", `{"data":[` + headsJSON(h.heads[3:]) + `]}`},
		{"&from=1&page_size=2", `{"data":[` + headsJSON(h.heads[1:3]) + `],"next_from":3}`},
		{"&from=4", `{"data":[]}`},
		{"&from=4294967295", `{"data":[]}`},
	} {
		st, body := h.get(t, base+c.query, acmeToken)
		if st != http.StatusOK || string(body) != c.want {
			t.Fatalf("history%s: %d\n got %s\nwant %s", c.query, st, body, c.want)
		}
		if _, err := verify.HeadsDocument(body, h.plane.Fleet.CA.Cert); err != nil {
			t.Fatalf("history%s does not verify: %v", c.query, err)
		}
	}
	// Pages of every size list every head once, in order.
	for size := 1; size <= 5; size++ {
		var got []head.Head
		for from, pages := 0, 0; ; pages++ {
			if pages > 4 {
				t.Fatalf("pages of %d do not end", size)
			}
			c := h.plane.QueryClient(t, acmeToken)
			res, err := c.ListTreeHeads(context.Background(), &centralv1.ListTreeHeadsRequest{TenantId: "acme", ApplianceId: "app_one",
				Day: h.tree.Day, From: proto.Uint32(uint32(from)), PageSize: proto.Int32(int32(size))})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range res.GetData() {
				got = append(got, service.HeadFromProto(m))
			}
			if res.NextFrom == nil {
				break
			}
			from = int(res.GetNextFrom())
		}
		if headsJSON(got) != headsJSON(h.heads) {
			t.Fatalf("pages of %d: %d heads, want the %d stored", size, len(got), len(h.heads))
		}
	}
	// A tree without heads: an empty list.
	st, body := h.get(t, fmt.Sprintf("/v1/tenants/acme/audit/history?appliance_id=app_two&day=%s", h.tree.Day), acmeToken)
	if st != http.StatusOK || string(body) != `{"data":[]}` {
		t.Fatalf("history of a tree without heads: %d %s", st, body)
	}
	for _, c := range []struct {
		name, query, token string
		status             int
		code, message      string
	}{
		{"no token", base, "", 401, "unauthorized", ""},
		{"another tenant's token", base, globexToken, 403, "forbidden", ""},
		{"no appliance_id", "/v1/tenants/acme/audit/history?day=" + h.tree.Day, acmeToken, 400, "invalid_request", "appliance_id is required (app_<id>)"},
		{"no day", "/v1/tenants/acme/audit/history?appliance_id=app_one", acmeToken, 400, "invalid_request", "day is required (YYYY-MM-DD)"},
		{"impossible day", "/v1/tenants/acme/audit/history?appliance_id=app_one&day=2026-02-30", acmeToken, 400, "invalid_request", "day 2026-02-30 is not a date (YYYY-MM-DD)"},
		{"page_size 0", base + "&page_size=0", acmeToken, 400, "invalid_request", "page_size must be an integer from 1 to 1000"},
		{"page_size 1001", base + "&page_size=1001", acmeToken, 400, "invalid_request", "page_size must be an integer from 1 to 1000"},
		{"from negative", base + "&from=-1", acmeToken, 400, "invalid_request", "from must be an integer from 0 to 4294967295"},
		{"from twice", base + "&from=1&from=2", acmeToken, 400, "invalid_request", "from must be given once"},
	} {
		st, body := h.get(t, c.query, c.token)
		msg := wantError(t, c.name, st, body, c.status, c.code)
		if c.message != "" && msg != c.message {
			t.Errorf("%s: message %q, want %q", c.name, msg, c.message)
		}
	}
}

func (h *history) consistency(from, to string) string {
	q := fmt.Sprintf("/v1/tenants/acme/audit/consistency?appliance_id=app_one&day=%s", h.tree.Day)
	if from != "" {
		q += "&from_size=" + from
	}
	if to != "" {
		q += "&to_size=" + to
	}
	return q
}

// TestConsistencyProof: GET .../audit/consistency serves the proof
// between any two stored heads of a tree (the first head of from_size,
// the latest of to_size, the tree's latest without to_size), which
// verifies offline; a forked head in its place does not.
func TestConsistencyProof(t *testing.T) {
	h := newHistory(t)
	ca := h.plane.Fleet.CA.Cert
	first := map[uint64]head.Head{}
	last := map[uint64]head.Head{}
	for _, hd := range h.heads {
		if _, ok := first[hd.EventCount]; !ok {
			first[hd.EventCount] = hd
		}
		last[hd.EventCount] = hd
	}
	for _, c := range []struct {
		from, to string
		want     [2]uint64
	}{
		{"2", "5", [2]uint64{2, 5}},
		{"2", "9", [2]uint64{2, 9}},
		{"5", "9", [2]uint64{5, 9}},
		{"5", "", [2]uint64{5, 9}},
		{"9", "9", [2]uint64{9, 9}},
		{"2", "2", [2]uint64{2, 2}},
	} {
		st, body := h.get(t, h.consistency(c.from, c.to), acmeToken)
		if st != http.StatusOK {
			t.Fatalf("consistency %s to %s: %d %s", c.from, c.to, st, body)
		}
		doc, err := verify.ConsistencyDocument(body, ca)
		if err != nil {
			t.Fatalf("consistency %s to %s does not verify: %v\n%s", c.from, c.to, err, body)
		}
		fromHead, toHead := first[c.want[0]], last[c.want[1]]
		if doc.FromHead != fromHead || doc.ToHead != toHead || (len(doc.Proof) == 0) != (c.want[0] == c.want[1]) {
			t.Fatalf("consistency %s to %s: heads signed at %s and %s, %d hashes; want %s and %s", c.from, c.to,
				doc.FromHead.SignedAt, doc.ToHead.SignedAt, len(doc.Proof), fromHead.SignedAt, toHead.SignedAt)
		}
		want := fmt.Sprintf(`{"appliance_id":"app_one","day":"%s","from_size":%d,"to_size":%d,"consistency_proof":[%s],"from_head":%s,"to_head":%s}`,
			h.tree.Day, c.want[0], c.want[1], quoted(store.HexHashes(doc.Proof)), headJSON(fromHead), headJSON(toHead))
		if string(body) != want {
			t.Fatalf("consistency %s to %s:\n got %s\nwant %s", c.from, c.to, body, want)
		}
	}

	// A head of 5 events over other leaves, signed by the same key: the
	// served proof from the stored head of 5 does not join it to the head
	// of 9. The pair is forked.
	st, body := h.get(t, h.consistency("5", "9"), acmeToken)
	if st != http.StatusOK {
		t.Fatalf("consistency: %d %s", st, body)
	}
	other := centraltest.NewTree("acme", h.tree.App)
	other.Day = h.tree.Day
	other.Add(5)
	end, _ := ids.DayEnd(h.tree.Day)
	forked := other.Head(t, end.Add(-time.Hour))
	doc := strings.Replace(string(body), `"from_head":`+headJSON(first[5]), `"from_head":`+headJSON(forked), 1)
	if _, err := verify.ConsistencyDocument([]byte(doc), ca); verify.KindOf(err) != verify.Inclusion {
		t.Fatalf("a forked pair: %v, want an inclusion failure", err)
	}

	for _, c := range []struct {
		name, path, token string
		status            int
		code, message     string
	}{
		{"no token", h.consistency("2", "5"), "", 401, "unauthorized", ""},
		{"another tenant's token", h.consistency("2", "5"), globexToken, 403, "forbidden", ""},
		{"no from_size", h.consistency("", "5"), acmeToken, 400, "invalid_request", "from_size is required (the event_count of a stored head)"},
		{"to_size below from_size", h.consistency("5", "2"), acmeToken, 400, "invalid_request", "to_size must be at least from_size"},
		{"from_size a word", h.consistency("two", "5"), acmeToken, 400, "invalid_request", "from_size must be an integer from 0 to 4294967295"},
		{"to_size negative", h.consistency("2", "-5"), acmeToken, 400, "invalid_request", "to_size must be an integer from 0 to 4294967295"},
		{"to_size beyond the tree", h.consistency("2", "10"), acmeToken, 400, "size_out_of_range",
			"to_size 10 is above the size of the latest head of acme/app_one/" + h.tree.Day + ", 9 events"},
		{"from_size beyond the tree", h.consistency("12", ""), acmeToken, 400, "size_out_of_range",
			"from_size 12 is above the size of the latest head of acme/app_one/" + h.tree.Day + ", 9 events"},
		{"no head of from_size", h.consistency("3", "9"), acmeToken, 404, "head_not_found",
			"from_size 3: no head of 3 events of acme/app_one/" + h.tree.Day + " is stored (its heads are listed at /v1/tenants/acme/audit/history)"},
		{"no head of to_size", h.consistency("2", "7"), acmeToken, 404, "head_not_found", ""},
		{"no head of 0 events", h.consistency("0", "9"), acmeToken, 404, "head_not_found", ""},
		{"a tree without heads", strings.Replace(h.consistency("2", "5"), "app_one", "app_two", 1), acmeToken, 404, "head_not_found",
			"no head of the tree acme/app_two/" + h.tree.Day + " is stored"},
	} {
		st, body := h.get(t, c.path, c.token)
		msg := wantError(t, c.name, st, body, c.status, c.code)
		if c.message != "" && msg != c.message {
			t.Errorf("%s: message %q, want %q", c.name, msg, c.message)
		}
	}

	// The gRPC API: the same proof, and the codes the REST statuses come
	// from.
	ctx := context.Background()
	c := h.plane.QueryClient(t, acmeToken)
	req := func(from uint32, to *uint32) *centralv1.GetConsistencyProofRequest {
		return &centralv1.GetConsistencyProofRequest{TenantId: "acme", ApplianceId: "app_one", Day: h.tree.Day, FromSize: proto.Uint32(from), ToSize: to}
	}
	res, err := c.GetConsistencyProof(ctx, req(2, nil))
	if err != nil || res.GetToSize() != 9 || service.HeadFromProto(res.GetToHead()) != h.heads[3] || len(res.GetConsistencyProof()) == 0 {
		t.Fatalf("GetConsistencyProof(2, latest): %v, %v", res, err)
	}
	for _, e := range []struct {
		req    *centralv1.GetConsistencyProofRequest
		code   codes.Code
		reason string
	}{
		{req(2, proto.Uint32(10)), codes.OutOfRange, apierr.ReasonSizeOutOfRange},
		{req(3, nil), codes.NotFound, apierr.ReasonHeadNotFound},
		{req(5, proto.Uint32(2)), codes.InvalidArgument, ""},
		{&centralv1.GetConsistencyProofRequest{TenantId: "acme", ApplianceId: "app_one", Day: h.tree.Day}, codes.InvalidArgument, ""},
	} {
		_, err := c.GetConsistencyProof(ctx, e.req)
		st := status.Convert(err)
		info := apierr.Info(st)
		if st.Code() != e.code || (e.reason != "" && info.GetReason() != e.reason) {
			t.Errorf("GetConsistencyProof(%v): %v (%s), want %s %s", e.req, err, info.GetReason(), e.code, e.reason)
		}
	}
}

func quoted(ss []string) string {
	for i, s := range ss {
		ss[i] = `"` + s + `"`
	}
	return strings.Join(ss, ",")
}

// TestConsistencyAfterLeafRetention: once a tree's leaves are pruned (a
// tree an older plane stored, with the appliance's body retention), a
// consistency proof that needs its nodes is 410 proof_expired, like an
// inclusion proof; its heads, and a proof between heads of one size, are
// still served.
func TestConsistencyAfterLeafRetention(t *testing.T) {
	p, pass := startPrunedPlane(t, committedByOlderPlane(func(store.TreeID) int { return 90 }))
	ctx := context.Background()
	if err := p.Tokens.SetAuditTokens(ctx, "acme", []string{acmeToken}); err != nil {
		t.Fatal(err)
	}
	tr := centraltest.NewTree("acme", p.Fleet.Appliance(t, "app_one"))
	for _, n := range []int{2, 3} {
		from := uint64(len(tr.Leaves))
		tr.Add(n)
		if _, err := centraltest.Publish(ctx, p.IngestClient(t, tr.App), tr.Upload(t, from)); err != nil {
			t.Fatal(err)
		}
	}
	expire, _ := store.LeavesExpire(tr.Day, 90)
	if got := pass(expire); got != (store.Pruned{LeafTrees: 1}) {
		t.Fatalf("the pass at leaf expiry: %+v", got)
	}
	path := func(from, to int) string {
		return fmt.Sprintf("/v1/tenants/acme/audit/consistency?appliance_id=app_one&day=%s&from_size=%d&to_size=%d", tr.Day, from, to)
	}
	st, _, body := webtest.Get(t, p.BaseURL+path(2, 5), acmeToken)
	wantError(t, "a proof over pruned nodes", st, body, http.StatusGone, "proof_expired")
	st, _, body = webtest.Get(t, p.BaseURL+path(5, 5), acmeToken)
	if st != http.StatusOK {
		t.Fatalf("a proof between heads of one size, after the prune: %d %s", st, body)
	}
	if _, err := verify.ConsistencyDocument(body, p.Fleet.CA.Cert); err != nil {
		t.Fatal(err)
	}
	st, _, body = webtest.Get(t, p.BaseURL+fmt.Sprintf("/v1/tenants/acme/audit/history?appliance_id=app_one&day=%s", tr.Day), acmeToken)
	if heads, err := verify.HeadsDocument(body, p.Fleet.CA.Cert); st != http.StatusOK || err != nil || len(heads) != 2 {
		t.Fatalf("the history after the prune: %d %v %s", st, err, body)
	}
}
