package fleet_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/central/centralclient"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/ingest"
	"github.com/tollgate-dev/tollgate/central/tlsconf"
	"github.com/tollgate-dev/tollgate/central/verify"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
	"github.com/tollgate-dev/tollgate/internal/pgtest"
)

// ingestClient dials replica r's ingest listener directly as app.
func ingestClient(t *testing.T, p *plane, r *replica, app *fleet.Appliance) centralv1.CentralAuditServiceClient {
	t.Helper()
	roots, err := tlsconf.Pool(p.certPEM)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(r.ingest, grpc.WithTransportCredentials(credentials.NewTLS(tlsconf.Appliance(app, roots, "127.0.0.1"))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return centralv1.NewCentralAuditServiceClient(conn)
}

// publishBoth sends u to both replicas at once and returns their answers.
func publishBoth(ctx context.Context, clients [2]centralv1.CentralAuditServiceClient, u ingest.Upload) [2]error {
	var (
		errs  [2]error
		wg    sync.WaitGroup
		ready = make(chan struct{})
	)
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ready
			_, errs[i] = centraltest.Publish(ctx, c, u)
		}()
	}
	close(ready)
	wg.Wait()
	return errs
}

// reasonOf is the refusal reason of err ("" for none, or err's text when
// it is not a refusal).
func reasonOf(err error) string {
	if err == nil {
		return ""
	}
	if r, _, ok := centralclient.RefusalOf(err); ok {
		return r
	}
	return err.Error()
}

// TestReplicasRaceForOneTree sends the same uploads to two replicas on one
// PostgreSQL schema at once, as an appliance's resend through a balancer
// can after the replica it first reached stalled: each head is stored
// once, one replica answers it stored and the other stored too (a
// duplicate) or `conflict`, which the forwarder retries and which then
// passes as a duplicate. A forked head sent to both at once is refused as
// `inconsistent` by both and its evidence kept once, readable from either
// replica. The replicas start together on a new schema.
func TestReplicasRaceForOneTree(t *testing.T) {
	pgtest.Require(t)
	awayFromMidnight(t, 10*time.Minute)
	fl := centraltest.NewFleet(t)
	const tenant = "acme"
	p := newPlane(t, fl.CA.CertPEM, map[string]string{tenant: tokenOf(tenant)})
	// Both start at once on the new schema: creating it is serialised
	// by an advisory lock, so neither fails on the other's tables.
	var (
		reps   [2]*replica
		errs   [2]error
		starts sync.WaitGroup
	)
	for i, name := range []string{"a", "b"} {
		starts.Add(1)
		go func() {
			defer starts.Done()
			reps[i], errs[i] = p.launch(t, name)
		}()
	}
	starts.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	app := fl.Appliance(t, "app_race")
	clients := [2]centralv1.CentralAuditServiceClient{ingestClient(t, p, reps[0], app), ingestClient(t, p, reps[1], app)}
	ctx := waitCtx(t, 5*time.Minute)

	tree := centraltest.NewTree(tenant, app)
	const rounds = 30
	conflicts := 0
	for k := range rounds {
		from := uint64(len(tree.Leaves))
		tree.Add(3)
		u := tree.Upload(t, from)
		errs := publishBoth(ctx, clients, u)
		for i, err := range errs {
			switch reasonOf(err) {
			case "":
			case centralclient.ReasonConflict:
				conflicts++
				// The forwarder retries a conflict: the same upload again.
				if _, err := centraltest.Publish(ctx, clients[i], u); err != nil {
					t.Fatalf("round %d: replica %s refused the retry after a conflict: %v", k, reps[i].name, err)
				}
			default:
				t.Fatalf("round %d: replica %s answered %v", k, reps[i].name, err)
			}
		}
		if errs[0] != nil && errs[1] != nil {
			t.Fatalf("round %d: neither replica stored the head: %v, %v", k, errs[0], errs[1])
		}
	}
	var heads, leaves int
	conn := connect(t, p.schema)
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM heads), (SELECT count(*) FROM leaves)`).Scan(&heads, &leaves); err != nil {
		t.Fatal(err)
	}
	if heads != rounds || leaves != len(tree.Leaves) {
		t.Fatalf("PostgreSQL holds %d heads and %d leaves, want %d and %d", heads, leaves, rounds, len(tree.Leaves))
	}
	t.Logf("%d heads sent to both replicas at once: each stored once, %d conflicts retried", rounds, conflicts)

	// A fork: another tree of the same appliance, tenant and day, signed
	// at a stored size with other leaves.
	forked := centraltest.NewTree(tenant, app)
	forked.Add(6)
	fu := ingest.Upload{Head: forked.HeadAt(t, 6, time.Now()), Leaves: forked.Leaves[:6], LeafRetentionDays: 30}
	for i, err := range publishBoth(ctx, clients, fu) {
		if reasonOf(err) != centralclient.ReasonInconsistent {
			t.Fatalf("replica %s answered the forked head with %v, want inconsistent", reps[i].name, err)
		}
	}
	var forks int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM forks`).Scan(&forks); err != nil {
		t.Fatal(err)
	}
	if forks != 1 {
		t.Fatalf("PostgreSQL holds %d forks, want the one", forks)
	}
	for _, r := range reps {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/tenants/%s/audit/forks?day=%s", r.rest, tenant, tree.Day), nil)
		req.Header.Set("Authorization", "Bearer "+tokenOf(tenant))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body []byte
		body, err = readAll(resp)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("replica %s forks: %d %s %v", r.name, resp.StatusCode, body, err)
		}
		docs, err := verify.ParseForks(body)
		if err != nil {
			t.Fatal(err)
		}
		if len(docs) != 1 || docs[0].SignedHead.MerkleRoot != fu.Head.MerkleRoot {
			t.Fatalf("replica %s lists %d forks, want the one of root %s", r.name, len(docs), fu.Head.MerkleRoot)
		}
	}
}

// readAll reads and closes a response's body, at most 1 MiB.
func readAll(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, 1<<20))
}
