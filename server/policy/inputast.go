package policy

import (
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// Terms of the input document that never change, built once: evaluation
// never mutates input terms, so every decision can share them.
var (
	kVersion      = ast.StringTerm("version")
	kApplianceID  = ast.StringTerm("appliance_id")
	kTime         = ast.StringTerm("time")
	kTimeNS       = ast.StringTerm("time_ns")
	kKey          = ast.StringTerm("key")
	kRequest      = ast.StringTerm("request")
	kTenantID     = ast.StringTerm("tenant_id")
	kKeyID        = ast.StringTerm("key_id")
	kLabel        = ast.StringTerm("label")
	kScopes       = ast.StringTerm("scopes")
	kAllModels    = ast.StringTerm("all_models")
	kModels       = ast.StringTerm("models")
	kID           = ast.StringTerm("id")
	kEndpoint     = ast.StringTerm("endpoint")
	kModel        = ast.StringTerm("model")
	kStream       = ast.StringTerm("stream")
	kTools        = ast.StringTerm("tools")
	kToolChoice   = ast.StringTerm("tool_choice")
	kMode         = ast.StringTerm("mode")
	kName         = ast.StringTerm("name")
	kMessageCount = ast.StringTerm("message_count")
	kTemperature  = ast.StringTerm("temperature")
	kMaxTokens    = ast.StringTerm("max_tokens")
	kEffort       = ast.StringTerm("reasoning_effort")
	vVersion      = ast.IntNumberTerm(InputVersion)

	endpointValues = map[Endpoint]ast.Value{
		EndpointChatCompletions: ast.String(EndpointChatCompletions),
		EndpointEmbeddings:      ast.String(EndpointEmbeddings),
		EndpointCompletions:     ast.String(EndpointCompletions),
		EndpointModels:          ast.String(EndpointModels),
	}
	// toolChoiceValues are input.request.tool_choice for the modes that
	// name no tool.
	toolChoiceValues = map[ToolChoiceMode]ast.Value{
		ToolChoiceNone:     ast.NewObject(ast.Item(kMode, ast.StringTerm(string(ToolChoiceNone)))),
		ToolChoiceAuto:     ast.NewObject(ast.Item(kMode, ast.StringTerm(string(ToolChoiceAuto)))),
		ToolChoiceRequired: ast.NewObject(ast.Item(kMode, ast.StringTerm(string(ToolChoiceRequired)))),
	}
	modeFunction = ast.StringTerm(string(ToolChoiceFunction))
	// effortValues are input.request.reasoning_effort for OpenAI's values,
	// which are all the gateway accepts; another value is built per
	// decision.
	effortValues = stringValues("none", "minimal", "low", "medium", "high", "xhigh", "max")
)

// stringValues maps each of ss to its Rego string.
func stringValues(ss ...string) map[string]ast.Value {
	m := make(map[string]ast.Value, len(ss))
	for _, s := range ss {
		m[s] = ast.String(s)
	}
	return m
}

// toAST builds the input document (docs/policy.md) directly as a Rego
// value, so evaluation needs no JSON round trip. key is input.key, tc the
// effective tool_choice and now the decision time.
func (in *Input) toAST(key *ast.Term, tc ToolChoice, now time.Time) ast.Value {
	return newInputDoc().fill(in, key, tc, now)
}

// inputDoc is a reusable input document. Building the document's two
// objects, the top level and input.request, afresh was the largest
// allocation of a decision (about 1.1 KB, most of it their hash maps), so
// decisions reuse them: the objects keep their keys, and their values are
// terms the inputDoc owns, which fill changes in place. Inserting a key
// that is already present makes an object recompute its hash from all its
// values, so one Insert per object after the changes leaves it equal, hash
// included, to what ast.NewObject would build (TestInputDocReuse checks
// this against a fresh build).
//
// Optional request fields must be absent rather than null, so there is a
// request object for each combination of them; all eight share the value
// terms. An object is built the first time its combination is decided on:
// most traffic uses few of them.
//
// An inputDoc serves one evaluation at a time and may be reused only once
// that evaluation has returned and its output has been copied into Go
// values; see Engine.Decide.
type inputDoc struct {
	top ast.Object
	// request holds the request object by optional fields present (the
	// has* bits); nil until first used.
	request [1 << numOptional]ast.Object

	applianceID, time, timeNS, key, req ast.Term

	id, endpoint, model, stream, tools, toolChoice, messageCount, temperature, maxTokens, effort ast.Term
}

// The optional fields of input.request, as bits of a request variant.
const (
	hasTemperature = 1 << iota
	hasMaxTokens
	hasEffort
	numOptional = iota
)

func newInputDoc() *inputDoc {
	d := new(inputDoc)
	for _, t := range []*ast.Term{
		&d.applianceID, &d.time, &d.timeNS, &d.key, &d.req,
		&d.id, &d.endpoint, &d.model, &d.stream, &d.tools, &d.toolChoice, &d.messageCount, &d.temperature, &d.maxTokens, &d.effort,
	} {
		t.Value = ast.Null{}
	}
	d.top = ast.NewObject(
		ast.Item(kVersion, vVersion),
		ast.Item(kApplianceID, &d.applianceID),
		ast.Item(kTime, &d.time),
		ast.Item(kTimeNS, &d.timeNS),
		ast.Item(kKey, &d.key),
		ast.Item(kRequest, &d.req),
	)
	return d
}

// requestObject is the request object of variant (has* bits), built on
// first use.
func (d *inputDoc) requestObject(variant int) ast.Object {
	if o := d.request[variant]; o != nil {
		return o
	}
	items := make([][2]*ast.Term, 0, 7+numOptional)
	items = append(items,
		ast.Item(kID, &d.id),
		ast.Item(kEndpoint, &d.endpoint),
		ast.Item(kModel, &d.model),
		ast.Item(kStream, &d.stream),
		ast.Item(kTools, &d.tools),
		ast.Item(kToolChoice, &d.toolChoice),
		ast.Item(kMessageCount, &d.messageCount),
	)
	if variant&hasTemperature != 0 {
		items = append(items, ast.Item(kTemperature, &d.temperature))
	}
	if variant&hasMaxTokens != 0 {
		items = append(items, ast.Item(kMaxTokens, &d.maxTokens))
	}
	if variant&hasEffort != 0 {
		items = append(items, ast.Item(kEffort, &d.effort))
	}
	o := ast.NewObject(items...)
	d.request[variant] = o
	return o
}

// fill makes d the input document of in and returns it.
func (d *inputDoc) fill(in *Input, key *ast.Term, tc ToolChoice, now time.Time) ast.Value {
	r := &in.Request
	variant := 0
	if t := r.Temperature; t != nil && !math.IsNaN(*t) && !math.IsInf(*t, 0) {
		variant |= hasTemperature
		d.temperature.Value = ast.Number(strconv.FormatFloat(*t, 'g', -1, 64))
	}
	if r.MaxTokens != nil {
		variant |= hasMaxTokens
		d.maxTokens.Value = intValue(*r.MaxTokens)
	}
	if e := r.ReasoningEffort; e != nil {
		variant |= hasEffort
		if v, ok := effortValues[*e]; ok {
			d.effort.Value = v
		} else {
			d.effort.Value = ast.String(*e)
		}
	}
	d.id.Value = ast.String(r.ID)
	if v, ok := endpointValues[r.Endpoint]; ok {
		d.endpoint.Value = v
	} else {
		d.endpoint.Value = ast.String(r.Endpoint)
	}
	d.model.Value = ast.String(r.Model)
	d.stream.Value = ast.Boolean(r.Stream)
	d.tools.Value = stringsArray(r.Tools)
	if v, ok := toolChoiceValues[tc.Mode]; ok {
		d.toolChoice.Value = v
	} else {
		d.toolChoice.Value = ast.NewObject(ast.Item(kMode, modeFunction), ast.Item(kName, ast.StringTerm(tc.Name)))
	}
	d.messageCount.Value = intValue(int64(r.MessageCount))
	req := d.requestObject(variant)
	req.Insert(kID, &d.id) // rehash after the changes above

	d.applianceID.Value = ast.String(in.ApplianceID)
	d.time.Value = ast.String(now.UTC().Format(time.RFC3339Nano))
	d.timeNS.Value = intValue(now.UnixNano())
	d.key.Value = key.Value
	d.req.Value = req
	d.top.Insert(kVersion, vVersion) // rehash
	return d.top
}

// intValue is n as a Rego number; small values are OPA's interned ones.
func intValue(n int64) ast.Value {
	if int64(int(n)) == n && ast.HasInternedIntNumberTerm(int(n)) {
		return ast.InternedTerm(int(n)).Value
	}
	return ast.Number(strconv.FormatInt(n, 10))
}

// keyTerm is input.key. Models are sorted so the document is stable.
func keyTerm(k *keys.Principal) *ast.Term {
	models := make([]string, 0, len(k.Models))
	for m := range k.Models {
		models = append(models, m)
	}
	slices.Sort(models)
	return ast.ObjectTerm(
		ast.Item(kTenantID, ast.StringTerm(k.TenantID)),
		ast.Item(kKeyID, ast.StringTerm(k.KeyID)),
		ast.Item(kLabel, ast.StringTerm(k.Label)),
		ast.Item(kScopes, ast.NewTerm(stringsArray(k.Scopes))),
		ast.Item(kAllModels, ast.InternedTerm(k.AllModels)),
		ast.Item(kModels, ast.NewTerm(stringsArray(models))),
	)
}

// stringsArray is an array of strings; nil gives an empty array, never
// null. Its terms are allocated together.
func stringsArray(ss []string) *ast.Array {
	terms := make([]ast.Term, len(ss))
	elems := make([]*ast.Term, len(ss))
	for i, s := range ss {
		terms[i].Value = ast.String(s)
		elems[i] = &terms[i]
	}
	return ast.NewArray(elems...)
}
