package policy

import (
	"os"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// TestMemoPlan: a bundle's decisions are memoized only when its output
// provably depends on nothing but input fields that repeat between
// requests, and the memo is keyed on exactly the fields it reads. Each
// bundle is planned from its compiled modules both as Compile compiles
// it (when Compile accepts it) and with print statements kept.
func TestMemoPlan(t *testing.T) {
	defaultRego, err := os.ReadFile(defaultBundle + "/tollgate/gateway.rego")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		rego string // the rules after the package line
		// keyedOn lists the fields of a memoized bundle; off is a part of
		// the reason an unmemoized one gives.
		keyedOn, off string
		// refused: Compile refuses the bundle, so it is planned from the
		// modules alone.
		refused bool
		// printKept: the plan differs once print statements are kept.
		printOff string
	}{
		{name: "default bundle", rego: string(defaultRego[strings.Index(string(defaultRego), "package"):]), keyedOn: "input.key.label,input.request.tools"},
		{name: "version only", rego: `decision := {"allow": input.version == 1}`, keyedOn: ""},
		{name: "narrowing", rego: narrowingRego, keyedOn: "input.request.model,input.request.tools"},
		{name: "input.time", rego: `decision := {"allow": input.time != ""}`, off: "reads input.time,"},
		{name: "input.time_ns", rego: `decision := {"allow": time.weekday(input.time_ns) != "Sunday"}`, off: "reads input.time_ns,"},
		{name: "input.request.id", rego: `decision := {"allow": startswith(input.request.id, "req_")}`, off: "reads input.request.id,"},
		{name: "time.now_ns", rego: `decision := {"allow": time.now_ns() > 0}`, off: "calls time.now_ns,"},
		{name: "http.send", rego: `decision := {"allow": http.send({"method": "GET", "url": "http://x"}).status_code == 200}`, off: "calls http.send,", refused: true},
		{name: "rand.intn", rego: `decision := {"allow": rand.intn("x", 10) > 4}`, off: "calls rand.intn,"},
		{name: "uuid.rfc4122", rego: `decision := {"allow": uuid.rfc4122("x") != ""}`, off: "calls uuid.rfc4122,"},
		{name: "opa.runtime", rego: `decision := {"allow": opa.runtime().version != ""}`, off: "calls opa.runtime,"},
		{name: "trace", rego: `decision := {"allow": true} if trace("deciding")`, off: "calls trace,"},
		{name: "io.jwt.decode_verify (nondeterministic)", rego: `decision := {"allow": io.jwt.decode_verify("x", {"secret": "s"})[0]}`, off: "calls io.jwt.decode_verify,"},
		{
			name: "x509 chain verified against the clock",
			rego: `decision := {"allow": crypto.x509.parse_and_verify_certificates("x")[0]}`,
			off:  "calls crypto.x509.parse_and_verify_certificates,",
		},
		{
			name: "print", rego: `decision := {"allow": true} if print(input.key.label)`,
			keyedOn: "", printOff: "calls internal.print,", // Compile drops print calls
		},
		{name: "input whole", rego: `decision := {"allow": count(input) > 0}`, off: "reads the whole input document"},
		{name: "walk over input", rego: `decision := {"allow": count([p | walk(input, [p, _])]) > 0}`, off: "reads the whole input document"},
		{name: "json.marshal(input)", rego: `decision := {"allow": true, "reason": json.marshal(input)}`, off: "reads the whole input document"},
		{name: "with input as", rego: "lbl := input.key.label\n\ndecision := {\"allow\": x == \"x\"} if {\n\tx := lbl with input as {\"key\": {\"label\": \"x\"}}\n}", off: "reads the whole input document"},
		{name: "input.request by a variable", rego: `decision := {"allow": count([k | input.request[k]]) > 0}`, off: "reads input.request["},
		{
			name: "object.get of one field", rego: `decision := {"allow": object.get(input.request, "temperature", 1) < 1.5}`,
			keyedOn: "input.request.temperature",
		},
		{
			name:    "object.get of two fields of one variable",
			rego:    "decision := {\"allow\": t < 1.5} if {\n\tr := input.request\n\tt := object.get(r, \"temperature\", 1)\n\tobject.get(r, \"max_tokens\", 0) < 100\n}",
			keyedOn: "input.request.max_tokens,input.request.temperature",
		},
		{
			name: "object.get, and the variable read otherwise",
			rego: "decision := {\"allow\": t < 1.5} if {\n\tr := input.request\n\tt := object.get(r, \"temperature\", 1)\n\tr.model != \"x\"\n}",
			off:  "reads input.request,",
		},
		{
			name: "object.get with a variable name", rego: `n := "temperature"` + "\n\n" + `decision := {"allow": object.get(input.request, n, 1) < 1.5}`,
			off: "reads input.request,",
		},
		{
			name: "object.get with a default read from input", rego: `decision := {"allow": object.get(input.request, "temperature", input.request.id) != 2}`,
			off: "reads input.request.id,",
		},
		{
			name: "object.keys of input.request", rego: `decision := {"allow": count(object.keys(input.request)) > 0}`,
			off: "reads input.request,",
		},
		{
			name: "a default for an optional field", rego: "default temperature := 1\n\ntemperature := input.request.temperature\n\n" +
				`decision := {"allow": temperature < 1.5}`,
			keyedOn: "input.request.temperature",
		},
		{name: "a field the document does not have", rego: `decision := {"allow": input.request.user != "x"}`, off: "reads input.request.user, which the input document does not have"},
		{
			name: "every field but the per-request ones",
			rego: `decision := {"allow": true, "reason": json.marshal([input.appliance_id, input.key, input.request.endpoint,
	input.request.model, input.request.stream, input.request.tools, input.request.tool_choice.mode,
	input.request.message_count, input.request.temperature, input.request.max_tokens, input.request.reasoning_effort])}`,
			keyedOn: "input.appliance_id,input.key.all_models,input.key.key_id,input.key.label,input.key.models," +
				"input.key.scopes,input.key.tenant_id,input.request.endpoint,input.request.max_tokens," +
				"input.request.message_count,input.request.model,input.request.reasoning_effort,input.request.stream," +
				"input.request.temperature,input.request.tool_choice,input.request.tools",
		},
		{
			name:    "elements of tools, index from input",
			rego:    `decision := {"allow": input.request.tools[input.request.message_count] != "x"}`,
			keyedOn: "input.request.message_count,input.request.tools",
		},
		{
			name: "input read in a helper rule and function",
			rego: "tenant := input.key.tenant_id\n\nf(x) := x == input.request.model\n\ndecision := {\"allow\": tenant == \"a\"} if f(\"m\")\n" +
				"else := {\"allow\": input.request.stream}",
			keyedOn: "input.key.tenant_id,input.request.model,input.request.stream",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "package tollgate.gateway\n\n" + strings.TrimPrefix(tt.rego, "package tollgate.gateway\n")
			if !tt.refused {
				e := load(t, regoBundle(t, "plan-1", src))
				memoized, detail := e.Active().DecisionMemo()
				checkPlan(t, "Compile", memoized, detail, tt.keyedOn, tt.off)
			}
			off := tt.off
			if tt.printOff != "" {
				off = tt.printOff
			}
			p := planModules(t, src)
			checkPlan(t, "print kept", p.off == "", memoPlanDetail(p), tt.keyedOn, off)
		})
	}
}

func memoPlanDetail(p memoPlan) string {
	if p.off != "" {
		return p.off
	}
	return p.fields.names()
}

func checkPlan(t *testing.T, how string, memoized bool, detail, keyedOn, off string) {
	t.Helper()
	switch {
	case off == "" && (!memoized || detail != keyedOn):
		t.Errorf("%s: memoized=%v %q; want memoized on %q", how, memoized, detail, keyedOn)
	case off != "" && (memoized || !strings.Contains(detail, off)):
		t.Errorf("%s: memoized=%v %q; want not memoized, %q", how, memoized, detail, off)
	}
}

// planModules plans a module compiled directly, print statements kept,
// and without Compile's refusal of the network builtins.
func planModules(t *testing.T, src string) memoPlan {
	t.Helper()
	c, err := ast.CompileModulesWithOpt(map[string]string{"gateway.rego": src},
		ast.CompileOpts{EnablePrintStatements: true, ParserOptions: ast.ParserOptions{RegoVersion: ast.RegoV1}})
	if err != nil {
		t.Fatal(err)
	}
	return planMemo(c)
}

// TestMemoPlanData: a bundle that reads its data documents is memoized:
// a bundle's data cannot change while it is active.
func TestMemoPlanData(t *testing.T) {
	dir := writeBundle(t, map[string]string{
		".manifest":                     `{"revision": "data-1", "roots": ["tollgate"]}`,
		"tollgate/tenants/data.json":    `{"blocked": ["evil"]}`,
		"tollgate/gateway/gateway.rego": "package tollgate.gateway\n\ndecision := {\"allow\": false} if input.key.tenant_id in data.tollgate.tenants.blocked\nelse := {\"allow\": true}\n",
	})
	e := load(t, dir)
	if memoized, detail := e.Active().DecisionMemo(); !memoized || detail != "input.key.tenant_id" {
		t.Fatalf("memoized=%v %q; want memoized on input.key.tenant_id", memoized, detail)
	}
	for _, tenant := range []string{"evil", "good", "evil", "good"} {
		in := chat(keyWithTenant(tenant, "app"), unset)
		if d := decide(t, e, in); d.Allow != (tenant == "good") {
			t.Fatalf("tenant %s: %+v", tenant, d)
		}
	}
	if s := e.MemoStats(); s.Hits != 2 || s.Misses != 2 {
		t.Fatalf("memo stats %+v, want 2 hits and 2 misses", s)
	}
}

// TestInputSchema: every field of the input document is in inputSchema,
// and every field of inputSchema is in the document, so the fields a
// reference reads are those it can see.
func TestInputSchema(t *testing.T) {
	in := sampleInput()
	doc := in.toAST(keyTerm(in.Key), named("get_weather"), in.Time)
	var paths []string
	var walk func(prefix ast.Ref, v ast.Value)
	walk = func(prefix ast.Ref, v ast.Value) {
		read, ok := fieldsRead(prefix[1:])
		if !ok {
			t.Errorf("%v is in the document, not in inputSchema", prefix)
			return
		}
		obj, isObj := v.(ast.Object)
		n := inputSchema
		for _, e := range prefix[1:] {
			n = n.children[string(e.Value.(ast.String))]
		}
		if !isObj || n.children == nil {
			if read == 0 && len(prefix) != 2 { // input.version reads nothing
				t.Errorf("%v reads no field", prefix)
			}
			paths = append(paths, prefix.String())
			return
		}
		obj.Foreach(func(k, v *ast.Term) { walk(prefix.Append(k), v.Value) })
	}
	walk(ast.InputRootRef, doc)
	all := fieldSet(1<<numFields - 1)
	if got, want := len(paths), strings.Count(all.names(), ",")+2; got != want { // + input.version
		t.Errorf("the document has %d fields %v, inputSchema %d: %s", got, paths, want, all.names())
	}
	// Every field a memoized bundle can read has a key encoding.
	if _, ok := appendKey(nil, all&^perRequestFields, in, named("get_weather"), keyModels(keyTerm(in.Key))); !ok {
		t.Error("a field that is not per request has no key encoding")
	}
}
