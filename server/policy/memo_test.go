package policy

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// fieldsRego reads every field a memoized bundle may read, and narrows
// the tools on several of them.
const fieldsRego = `package tollgate.gateway

deny contains "no tools for ci" if {
	input.key.label == "ci"
	count(input.request.tools) > 0
}

deny contains sprintf("effort %s is reserved", [input.request.reasoning_effort]) if {
	input.request.reasoning_effort in {"xhigh", "max"}
	input.key.tenant_id != "research"
}

deny contains "hot stream" if {
	input.request.stream
	input.request.temperature > 1.5
}

deny contains "too long" if input.request.max_tokens > 1000

deny contains "too cold" if object.get(input.request, "temperature", 1) < 0.1

deny contains "embeddings need the embed model" if {
	input.request.endpoint == "/v1/embeddings"
	not input.key.all_models
	not "builtin/embed" in input.key.models
}

deny contains "not on this appliance" if input.appliance_id == "app_closed"

deny contains "long conversations need tool:*" if {
	input.request.message_count > 8
	not "tool:*" in input.key.scopes
}

deny contains "key_banned" if input.key.key_id == "key_banned"

default forced := ""

forced := input.request.tool_choice.name

decision := {"allow": false, "reason": concat("; ", sort(deny))} if {
	count(deny) > 0
} else := {"allow": true, "reason": "read-only", "tools": [t | some t in input.request.tools; startswith(t, "get_")]} if {
	input.key.tenant_id == "contractors"
	input.request.model != "builtin/open"
} else := {"allow": true, "reason": sprintf("forced %s", [forced])} if {
	input.request.tool_choice.mode == "function"
} else := {"allow": true, "reason": "allowed"}
`

// memoInputs is a range of inputs varying every field fieldsRego reads,
// each also repeated with another request id and time, which the memo
// must not key on.
func memoInputs() []Input {
	ptr := func(f float64) *float64 { return &f }
	i64 := func(n int64) *int64 { return &n }
	str := func(s string) *string { return &s }
	mk := func(tenant, label string, models []string, scopes ...string) *keys.Principal {
		return keys.NewPrincipal(tenant, "key_"+tenant+label, label, models == nil, models, 0, 0, scopes, time.Time{})
	}
	star := mk("acme", "app", nil, "tool:*")
	contractor := mk("contractors", "app", nil, "tool:*")
	ci := mk("acme", "ci", nil, "tool:*")
	echoOnly := mk("acme", "app", []string{"builtin/echo"}, "tool:get_a")
	withEmbed := mk("acme", "app", []string{"builtin/echo", "builtin/embed"}, "tool:get_a")
	banned := keys.NewPrincipal("acme", "key_banned", "app", true, nil, 0, 0, []string{"tool:*"}, time.Time{})

	var ins []Input
	add := func(in Input, edit func(*Request)) {
		if edit != nil {
			edit(&in.Request)
		}
		ins = append(ins, in)
	}
	for _, k := range []*keys.Principal{star, contractor, ci, banned} {
		add(chat(k, unset), nil)
		add(chat(k, auto, "get_a", "put_b"), nil)
		add(chat(k, auto, "put_b", "get_a"), nil)
		add(chat(k, named("get_a"), "get_a", "put_b"), nil)
		add(chat(k, named("put_b"), "get_a", "put_b"), nil)
		add(chat(k, required, "put_b"), nil)
		add(chat(k, required, "get_a"), nil)
		add(chat(k, none, "put_b"), nil)
		add(chat(k, unset), func(r *Request) { r.Model = "builtin/open"; r.Tools = []string{"put_b"} })
		add(chat(k, unset), func(r *Request) { r.Stream, r.Temperature = true, ptr(1.7) })
		add(chat(k, unset), func(r *Request) { r.Stream, r.Temperature = false, ptr(1.7) })
		add(chat(k, unset), func(r *Request) { r.Stream, r.Temperature = true, ptr(math.NaN()) })
		add(chat(k, unset), func(r *Request) { r.Temperature = ptr(0.05) })
		add(chat(k, unset), func(r *Request) { r.MaxTokens = i64(1001) })
		add(chat(k, unset), func(r *Request) { r.MaxTokens = i64(1000) })
		add(chat(k, unset), func(r *Request) { r.ReasoningEffort = str("max") })
		add(chat(k, unset), func(r *Request) { r.ReasoningEffort = str("low") })
		add(chat(k, unset), func(r *Request) { r.MessageCount = 9 })
	}
	for _, k := range []*keys.Principal{echoOnly, withEmbed} {
		add(chat(k, unset), func(r *Request) { r.Endpoint, r.Model = EndpointEmbeddings, "" })
		add(chat(k, unset), func(r *Request) { r.MessageCount = 9 })
	}
	closed := chat(star, unset)
	closed.ApplianceID = "app_closed"
	add(closed, nil)
	// Tools that would run together without length prefixes.
	add(chat(star, auto, "get_ab", "c"), nil)
	add(chat(star, auto, "get_a", "bc"), nil)

	n := len(ins)
	for i := range n {
		again := ins[i]
		again.Request.ID = fmt.Sprintf("req_again%d", i)
		again.Time = again.Time.Add(time.Duration(i+1) * time.Hour)
		ins = append(ins, again)
	}
	return ins
}

// TestMemoEqualsEvaluation: a memoized decision equals the one evaluated
// without the memo, id aside, for every input, whether it was a hit or
// a miss, narrowing included.
func TestMemoEqualsEvaluation(t *testing.T) {
	dir := regoBundle(t, "fields-1", fieldsRego)
	memoized := load(t, dir)
	if on, detail := memoized.Active().DecisionMemo(); !on {
		t.Fatalf("fieldsRego is not memoized: %s", detail)
	}
	evaluated, err := Load(context.Background(), dir, LoadOptions{NoDecisionMemo: true})
	if err != nil {
		t.Fatal(err)
	}
	ins := memoInputs()
	var narrowed, denied int
	for round := range 2 {
		for i, in := range ins {
			got, want := decide(t, memoized, in), decide(t, evaluated, in)
			if got.ID == want.ID {
				t.Fatalf("input %d: two decisions share id %s", i, got.ID)
			}
			got.ID, want.ID = "", ""
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, input %d (%+v): memoized %+v, evaluated %+v", round, i, in.Request, got, want)
			}
			if round == 0 && got.Narrowed {
				narrowed++
			}
			if round == 0 && !got.Allow {
				denied++
			}
		}
	}
	if narrowed == 0 || denied == 0 {
		t.Fatalf("the inputs narrow %d and deny %d times; want both", narrowed, denied)
	}
	s := memoized.MemoStats()
	if s.Misses == 0 || s.Misses > uint64(len(ins)/2) || s.Hits+s.Misses != uint64(2*len(ins)) {
		t.Fatalf("memo stats %+v for %d inputs twice, half of them repeats", s, len(ins))
	}
	if s := evaluated.MemoStats(); s.Enabled || s.Hits != 0 || s.Entries != 0 {
		t.Fatalf("memo switched off, stats %+v", s)
	}
}

// TestMemoDroppedOnReload: a new bundle starts with an empty memo, so
// its decisions are its own even for inputs decided before.
func TestMemoDroppedOnReload(t *testing.T) {
	rego := func(reason string) string {
		return "package tollgate.gateway\n\ndecision := {\"allow\": input.key.label != \"blocked\", \"reason\": \"" + reason + "\"}\n"
	}
	dir := regoBundle(t, "memo-1", rego("first"))
	e := load(t, dir)
	in := chat(key("app", nil), unset)
	for range 3 {
		if d := decide(t, e, in); d.Reason != "first" {
			t.Fatalf("decision %+v, want reason first", d)
		}
	}
	if s := e.MemoStats(); s.Hits != 2 || s.Entries != 1 {
		t.Fatalf("memo stats %+v, want 2 hits, 1 entry", s)
	}
	writeFiles(t, dir, map[string]string{"tollgate/gateway.rego": rego("second")})
	if err := e.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := e.MemoStats(); s.Entries != 0 {
		t.Fatalf("memo stats after reload %+v, want no entries", s)
	}
	if d := decide(t, e, in); d.Reason != "second" {
		t.Fatalf("decision after reload %+v, want reason second", d)
	}
	// A refused reload keeps the bundle, and its memo.
	writeFiles(t, dir, map[string]string{"tollgate/gateway.rego": "package tollgate.gateway\n\ndecision := {\n"})
	if err := e.Reload(context.Background()); err == nil {
		t.Fatal("a broken bundle was accepted")
	}
	if d := decide(t, e, in); d.Reason != "second" {
		t.Fatalf("decision after a refused reload %+v, want reason second", d)
	}
	if s := e.MemoStats(); s.Hits != 3 || s.Entries != 1 {
		t.Fatalf("memo stats %+v, want 3 hits, 1 entry", s)
	}
}

// TestMemoBounds: the memo holds no more than its entries and bytes.
func TestMemoBounds(t *testing.T) {
	dir := regoBundle(t, "bounds-1", "package tollgate.gateway\n\ndecision := {\"allow\": true, \"reason\": input.key.label}\n")
	tests := []struct {
		name            string
		entries, bytes  int
		wantMaxEntries  int
		wantMaxBytes    int
		wantMinEntries  int
		labelLen, count int
	}{
		{name: "entries", entries: 64, bytes: 1 << 30, wantMaxEntries: 64, wantMaxBytes: 1 << 30, wantMinEntries: 16, labelLen: 8, count: 2000},
		{name: "bytes", entries: 1 << 20, bytes: 64 << 10, wantMaxEntries: 1 << 20, wantMaxBytes: 64 << 10, wantMinEntries: 16, labelLen: 1000, count: 2000},
		{name: "entry larger than a shard's bytes", entries: 1 << 20, bytes: 16 << 10, wantMaxEntries: 0, wantMaxBytes: 0, labelLen: 2000, count: 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := Load(context.Background(), dir, LoadOptions{DecisionMemoEntries: tt.entries, DecisionMemoBytes: tt.bytes})
			if err != nil {
				t.Fatal(err)
			}
			for i := range tt.count {
				label := fmt.Sprintf("%0*d", tt.labelLen, i)
				if d := decide(t, e, chat(key(label, nil), unset)); d.Reason != label {
					t.Fatalf("decision %+v, want reason %s", d, label)
				}
				if s := e.MemoStats(); s.Entries > tt.wantMaxEntries || s.Bytes > tt.wantMaxBytes {
					t.Fatalf("after %d decisions: %+v, want at most %d entries, %d bytes", i+1, s, tt.wantMaxEntries, tt.wantMaxBytes)
				}
			}
			if s := e.MemoStats(); s.Entries < tt.wantMinEntries || s.Misses != uint64(tt.count) {
				t.Fatalf("memo stats %+v, want at least %d entries and %d misses", s, tt.wantMinEntries, tt.count)
			}
		})
	}
}

// TestMemoizedDecisionsAreLogged: every memoized decision has its own
// id and its own log line.
func TestMemoizedDecisionsAreLogged(t *testing.T) {
	var buf bytes.Buffer
	e, err := Load(context.Background(), defaultBundle, LoadOptions{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	ids := map[string]bool{}
	for i := range n {
		in := chat(key("app", nil, "tool:get_weather"), auto, "get_weather")
		in.Request.ID = fmt.Sprintf("req_%d", i)
		d := decide(t, e, in)
		if ids[d.ID] {
			t.Fatalf("decision id %s given twice", d.ID)
		}
		ids[d.ID] = true
		if !strings.Contains(buf.String(), "decision_id="+d.ID+" ") || !strings.Contains(buf.String(), "request_id="+in.Request.ID+" ") {
			t.Fatalf("no log line for decision %s of %s", d.ID, in.Request.ID)
		}
	}
	if got := strings.Count(buf.String(), `msg="policy decision"`); got != n {
		t.Fatalf("%d decision lines, want %d", got, n)
	}
	if s := e.MemoStats(); s.Hits != n-1 {
		t.Fatalf("memo stats %+v, want %d hits", s, n-1)
	}
	if !strings.Contains(buf.String(), "decision_memo=true decision_memo_keyed_on=input.key.label,input.request.tools") {
		t.Fatalf("the activation line does not describe the memo:\n%s", buf.String())
	}
}

// TestMemoKeyDistinguishes: inputs that differ in a field read have
// different keys, also where values would run together unprefixed.
func TestMemoKeyDistinguishes(t *testing.T) {
	all := fieldSet(1<<numFields-1) &^ perRequestFields
	base := func() Input {
		in := chat(key("app", []string{"m/a", "m/b"}, "tool:a", "tool:b"), auto, "ab", "c")
		return in
	}
	zero, empty := 0.0, ""
	var zeroTokens int64
	tests := []struct {
		name string
		edit func(*Input)
	}{
		{"tools split elsewhere", func(in *Input) { in.Request.Tools = []string{"a", "bc"} }},
		{"tools one more", func(in *Input) { in.Request.Tools = []string{"ab", "c", ""} }},
		{"scopes joined", func(in *Input) { in.Key = key("app", []string{"m/a", "m/b"}, "tool:atool:b") }},
		{"models", func(in *Input) { in.Key = key("app", []string{"m/a"}, "tool:a", "tool:b") }},
		{"all models", func(in *Input) { in.Key = key("app", nil, "tool:a", "tool:b") }},
		{"label", func(in *Input) { in.Key = key("ap", []string{"m/a", "m/b"}, "tool:a", "tool:b") }},
		{"temperature 0", func(in *Input) { in.Request.Temperature = &zero }},
		{"max_tokens 0", func(in *Input) { in.Request.MaxTokens = &zeroTokens }},
		{"empty effort", func(in *Input) { in.Request.ReasoningEffort = &empty }},
		{"stream", func(in *Input) { in.Request.Stream = true }},
		{"message count", func(in *Input) { in.Request.MessageCount = 3 }},
		{"endpoint", func(in *Input) { in.Request.Endpoint = EndpointCompletions }},
		{"model", func(in *Input) { in.Request.Model = "builtin/echo2" }},
		{"appliance", func(in *Input) { in.ApplianceID = "app_other" }},
		{"tool choice", func(in *Input) { in.Request.ToolChoice = named("c") }},
	}
	keyOf := func(in Input) string {
		k, ok := appendKey(nil, all, &in, in.Request.effectiveToolChoice(), keyModels(keyTerm(in.Key)))
		if !ok {
			t.Fatal("no key")
		}
		return string(k)
	}
	b := base()
	want := keyOf(b)
	b.Request.ID, b.Time = "req_other", b.Time.Add(time.Hour)
	if keyOf(b) != want {
		t.Fatal("the request id or time changed the key")
	}
	for _, tt := range tests {
		in := base()
		tt.edit(&in)
		if keyOf(in) == want {
			t.Errorf("%s: same key", tt.name)
		}
	}
}

// TestMemoMetrics: the collector reports the memo's counters and size.
func TestMemoMetrics(t *testing.T) {
	e := load(t, defaultBundle)
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.Metrics())
	for range 3 {
		decide(t, e, chat(key("app", nil), unset))
	}
	want := `
# HELP tollgate_policy_memo_entries Outputs the active bundle's decision memo holds.
# TYPE tollgate_policy_memo_entries gauge
tollgate_policy_memo_entries 1
# HELP tollgate_policy_memo_enabled 1 when the active bundle's decisions are memoized, 0 when every decision evaluates it.
# TYPE tollgate_policy_memo_enabled gauge
tollgate_policy_memo_enabled 1
# HELP tollgate_policy_memo_hits_total Decisions that reused the output the active bundle evaluated for an earlier, equal input (docs/policy.md), since start.
# TYPE tollgate_policy_memo_hits_total counter
tollgate_policy_memo_hits_total 2
# HELP tollgate_policy_memo_misses_total Decisions of a memoizing bundle that evaluated it, since start.
# TYPE tollgate_policy_memo_misses_total counter
tollgate_policy_memo_misses_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"tollgate_policy_memo_entries", "tollgate_policy_memo_enabled", "tollgate_policy_memo_hits_total", "tollgate_policy_memo_misses_total"); err != nil {
		t.Fatal(err)
	}
}
