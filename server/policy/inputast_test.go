package policy

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// TestInputDocReuse fills one inputDoc with many different inputs in a row
// and requires each result to equal, hash included, a document built
// afresh with ast.NewObject: reusing the objects must be invisible to a
// bundle (and to OPA, which keys caches and sets by hash).
func TestInputDocReuse(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pick := func(ss ...string) string { return ss[rng.IntN(len(ss))] }
	k1 := keyTerm(key("app", nil, "tool:*"))
	k2 := keyTerm(key("ci", []string{"x/a", "x/b"}, "tool:get_weather"))
	doc := newInputDoc()
	for i := range 2000 {
		in := Input{
			ApplianceID: pick("", "app_a", "app_b"),
			Time:        time.Unix(0, rng.Int64()).In(time.FixedZone("X", rng.IntN(7200))),
			Request: Request{
				ID:           pick("", "req_1", "req_2"),
				Endpoint:     Endpoint(pick(string(EndpointChatCompletions), string(EndpointEmbeddings), string(EndpointModels), "/v1/other")),
				Model:        pick("", "builtin/echo", "x/a"),
				Stream:       rng.IntN(2) == 0,
				MessageCount: []int{0, 1, 511, 512, 100000}[rng.IntN(5)],
			},
		}
		in.Request.Tools = []string{"get_weather", "get_time", "x"}[:rng.IntN(4)]
		if rng.IntN(2) == 0 {
			temp := []float64{0, 0.7, 2, math.NaN(), math.Inf(1)}[rng.IntN(5)]
			in.Request.Temperature = &temp
		}
		if rng.IntN(2) == 0 {
			n := []int64{-5, 1, 512, 1 << 40}[rng.IntN(4)]
			in.Request.MaxTokens = &n
		}
		if rng.IntN(2) == 0 {
			// OpenAI's values, and ones only a Go caller could pass.
			e := pick("none", "low", "xhigh", "max", "", "extreme")
			in.Request.ReasoningEffort = &e
		}
		tc := []ToolChoice{{Mode: ToolChoiceNone}, {Mode: ToolChoiceAuto}, {Mode: ToolChoiceRequired}, {Mode: ToolChoiceFunction, Name: pick("get_weather", "")}}[rng.IntN(4)]
		k := k1
		if rng.IntN(2) == 0 {
			k = k2
		}
		checkFill(t, fmt.Sprintf("fill %d", i), doc, &in, k, tc)
	}
}

// TestInputDocOptionalTransitions fills one inputDoc with every ordered
// pair of combinations of the optional request fields (temperature,
// max_tokens, reasoning_effort), so that each field is seen to appear,
// disappear and change value between two decisions sharing the document.
func TestInputDocOptionalTransitions(t *testing.T) {
	k := keyTerm(key("app", nil, "tool:*"))
	tc := ToolChoice{Mode: ToolChoiceAuto}
	// withOptional is a chat request with the optional fields of variant
	// (has* bits); round picks their values, so consecutive fills differ.
	withOptional := func(variant, round int) Input {
		in := chat(key("app", nil, "tool:*"), tc, "get_weather")
		if variant&hasTemperature != 0 {
			temp := []float64{0.2, 1.5}[round]
			in.Request.Temperature = &temp
		}
		if variant&hasMaxTokens != 0 {
			n := []int64{64, 4096}[round]
			in.Request.MaxTokens = &n
		}
		if variant&hasEffort != 0 {
			e := []string{"low", "xhigh"}[round]
			in.Request.ReasoningEffort = &e
		}
		return in
	}
	doc := newInputDoc()
	for from := range 1 << numOptional {
		for to := range 1 << numOptional {
			a, b := withOptional(from, 0), withOptional(to, 1)
			checkFill(t, fmt.Sprintf("variant %03b", from), doc, &a, k, tc)
			checkFill(t, fmt.Sprintf("variant %03b after %03b", to, from), doc, &b, k, tc)
		}
	}
}

// checkFill fills doc with in and requires the result to equal, hash
// included, the document freshInputDoc builds.
func checkFill(t *testing.T, name string, doc *inputDoc, in *Input, k *ast.Term, tc ToolChoice) {
	t.Helper()
	got := doc.fill(in, k, tc, in.Time)
	want := freshInputDoc(in, k, tc)
	if got.Compare(want) != 0 || !ast.NewTerm(got).Equal(ast.NewTerm(want)) || got.Hash() != want.Hash() {
		t.Fatalf("%s:\n got %v (hash %d)\nwant %v (hash %d)", name, got, got.Hash(), want, want.Hash())
	}
	req := got.(ast.Object).Get(kRequest).Value
	wreq := want.(ast.Object).Get(kRequest).Value
	if req.Hash() != wreq.Hash() || !ast.NewTerm(got).IsGround() {
		t.Fatalf("%s: request hash %d, want %d; ground %v", name, req.Hash(), wreq.Hash(), ast.NewTerm(got).IsGround())
	}
}

// freshInputDoc builds the input document of docs/policy.md from scratch,
// independently of inputDoc.
func freshInputDoc(in *Input, key *ast.Term, tc ToolChoice) ast.Value {
	r := in.Request
	num := func(n int64) *ast.Term { return ast.NumberTerm(json.Number(strconv.FormatInt(n, 10))) }
	tools := make([]*ast.Term, len(r.Tools))
	for i, s := range r.Tools {
		tools[i] = ast.StringTerm(s)
	}
	choice := []*ast.Term{ast.StringTerm("mode"), ast.StringTerm(string(tc.Mode))}
	items := [][2]*ast.Term{{choice[0], choice[1]}}
	if tc.Mode == ToolChoiceFunction {
		items = append(items, ast.Item(ast.StringTerm("name"), ast.StringTerm(tc.Name)))
	}
	req := [][2]*ast.Term{
		ast.Item(ast.StringTerm("id"), ast.StringTerm(r.ID)),
		ast.Item(ast.StringTerm("endpoint"), ast.StringTerm(string(r.Endpoint))),
		ast.Item(ast.StringTerm("model"), ast.StringTerm(r.Model)),
		ast.Item(ast.StringTerm("stream"), ast.BooleanTerm(r.Stream)),
		ast.Item(ast.StringTerm("tools"), ast.ArrayTerm(tools...)),
		ast.Item(ast.StringTerm("tool_choice"), ast.ObjectTerm(items...)),
		ast.Item(ast.StringTerm("message_count"), num(int64(r.MessageCount))),
	}
	if t := r.Temperature; t != nil && !math.IsNaN(*t) && !math.IsInf(*t, 0) {
		req = append(req, ast.Item(ast.StringTerm("temperature"), ast.FloatNumberTerm(*t)))
	}
	if r.MaxTokens != nil {
		req = append(req, ast.Item(ast.StringTerm("max_tokens"), num(*r.MaxTokens)))
	}
	if r.ReasoningEffort != nil {
		req = append(req, ast.Item(ast.StringTerm("reasoning_effort"), ast.StringTerm(*r.ReasoningEffort)))
	}
	return ast.NewObject(
		ast.Item(ast.StringTerm("version"), ast.IntNumberTerm(1)),
		ast.Item(ast.StringTerm("appliance_id"), ast.StringTerm(in.ApplianceID)),
		ast.Item(ast.StringTerm("time"), ast.StringTerm(in.Time.UTC().Format(time.RFC3339Nano))),
		ast.Item(ast.StringTerm("time_ns"), num(in.Time.UnixNano())),
		ast.Item(ast.StringTerm("key"), ast.NewTerm(key.Value)),
		ast.Item(ast.StringTerm("request"), ast.ObjectTerm(req...)),
	)
}
