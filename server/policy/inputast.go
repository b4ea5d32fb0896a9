package policy

import (
	"encoding/json"
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
	vVersion      = ast.IntNumberTerm(InputVersion)

	endpointTerms = map[Endpoint]*ast.Term{
		EndpointChatCompletions: ast.StringTerm(string(EndpointChatCompletions)),
		EndpointEmbeddings:      ast.StringTerm(string(EndpointEmbeddings)),
		EndpointModels:          ast.StringTerm(string(EndpointModels)),
	}
	// toolChoiceTerms are input.request.tool_choice for the modes that
	// name no tool.
	toolChoiceTerms = map[ToolChoiceMode]*ast.Term{
		ToolChoiceNone:     ast.ObjectTerm(ast.Item(kMode, ast.StringTerm(string(ToolChoiceNone)))),
		ToolChoiceAuto:     ast.ObjectTerm(ast.Item(kMode, ast.StringTerm(string(ToolChoiceAuto)))),
		ToolChoiceRequired: ast.ObjectTerm(ast.Item(kMode, ast.StringTerm(string(ToolChoiceRequired)))),
	}
	modeFunction = ast.StringTerm(string(ToolChoiceFunction))
)

// toAST builds the input document (docs/policy.md) directly as a Rego
// value, so evaluation needs no JSON round trip. key is input.key, tc the
// effective tool_choice and now the decision time.
func (in *Input) toAST(key *ast.Term, tc ToolChoice, now time.Time) ast.Value {
	return ast.NewObject(
		ast.Item(kVersion, vVersion),
		ast.Item(kApplianceID, ast.StringTerm(in.ApplianceID)),
		ast.Item(kTime, ast.StringTerm(now.UTC().Format(time.RFC3339Nano))),
		ast.Item(kTimeNS, int64Term(now.UnixNano())),
		ast.Item(kKey, key),
		ast.Item(kRequest, requestTerm(&in.Request, tc)),
	)
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
		ast.Item(kScopes, stringsTerm(k.Scopes)),
		ast.Item(kAllModels, ast.InternedTerm(k.AllModels)),
		ast.Item(kModels, stringsTerm(models)),
	)
}

// requestTerm is input.request. Optional fields the client did not send
// are absent, not null.
func requestTerm(r *Request, tc ToolChoice) *ast.Term {
	endpoint, ok := endpointTerms[r.Endpoint]
	if !ok {
		endpoint = ast.StringTerm(string(r.Endpoint))
	}
	choice, ok := toolChoiceTerms[tc.Mode]
	if !ok {
		choice = ast.ObjectTerm(ast.Item(kMode, modeFunction), ast.Item(kName, ast.StringTerm(tc.Name)))
	}
	items := make([][2]*ast.Term, 0, 9)
	items = append(items,
		ast.Item(kID, ast.StringTerm(r.ID)),
		ast.Item(kEndpoint, endpoint),
		ast.Item(kModel, ast.StringTerm(r.Model)),
		ast.Item(kStream, ast.InternedTerm(r.Stream)),
		ast.Item(kTools, stringsTerm(r.Tools)),
		ast.Item(kToolChoice, choice),
		ast.Item(kMessageCount, ast.IntNumberTerm(r.MessageCount)),
	)
	if t := r.Temperature; t != nil && !math.IsNaN(*t) && !math.IsInf(*t, 0) {
		items = append(items, ast.Item(kTemperature, ast.FloatNumberTerm(*t)))
	}
	if r.MaxTokens != nil {
		items = append(items, ast.Item(kMaxTokens, int64Term(*r.MaxTokens)))
	}
	return ast.ObjectTerm(items...)
}

// stringsTerm is an array of strings; nil gives an empty array, never null.
func stringsTerm(ss []string) *ast.Term {
	terms := make([]*ast.Term, len(ss))
	for i, s := range ss {
		terms[i] = ast.StringTerm(s)
	}
	return ast.ArrayTerm(terms...)
}

// int64Term is n as a Rego number; small values come from OPA's interned
// terms.
func int64Term(n int64) *ast.Term {
	if n >= -1 && n <= 512 {
		return ast.IntNumberTerm(int(n))
	}
	return ast.NumberTerm(json.Number(strconv.FormatInt(n, 10)))
}
