package policy

import (
	"time"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// InputVersion is the version of the input document this package produces
// (input.version). It changes only when a field changes meaning or goes
// away; adding a field keeps the version.
const InputVersion = 1

// Endpoint is the gateway endpoint of a request, as input.request.endpoint.
type Endpoint string

// The gateway endpoints a decision is asked for.
const (
	EndpointChatCompletions Endpoint = "/v1/chat/completions"
	EndpointEmbeddings      Endpoint = "/v1/embeddings"
	// EndpointCompletions is OpenAI's legacy completions: a prompt the
	// engine answers as one user message of a chat.
	EndpointCompletions Endpoint = "/v1/completions"
	EndpointModels      Endpoint = "/v1/models"
)

// ToolChoiceMode mirrors OpenAI's tool_choice, as input.request.tool_choice.mode.
type ToolChoiceMode string

// Tool choice modes. ToolChoiceUnspecified (the client sent no tool_choice)
// is resolved to OpenAI's default before deciding: auto when tools are
// offered, none otherwise.
const (
	ToolChoiceUnspecified ToolChoiceMode = ""
	ToolChoiceNone        ToolChoiceMode = "none"
	ToolChoiceAuto        ToolChoiceMode = "auto"
	ToolChoiceRequired    ToolChoiceMode = "required"
	// ToolChoiceFunction forces the tool named by ToolChoice.Name.
	ToolChoiceFunction ToolChoiceMode = "function"
)

// ToolChoice is the request's tool_choice.
type ToolChoice struct {
	Mode ToolChoiceMode
	// Name is the forced tool when Mode is ToolChoiceFunction.
	Name string
}

// Request describes the gateway request being decided.
type Request struct {
	// ID is the request id (req_<id>), for the decision log; may be empty.
	ID       string
	Endpoint Endpoint
	// Model is <namespace>/<model_name>. For EndpointModels: the id a
	// GET /v1/models/{id} looks up, empty for the list.
	Model  string
	Stream bool
	// Tools are the names of the function tools offered, in request order.
	Tools        []string
	ToolChoice   ToolChoice
	MessageCount int
	// Temperature, MaxTokens and ReasoningEffort are nil when the client
	// did not send them.
	Temperature *float64
	MaxTokens   *int64
	// ReasoningEffort is OpenAI's reasoning_effort as sent (none, minimal,
	// low, medium, high, xhigh or max), passed to the bundle as it is.
	ReasoningEffort *string
}

// Input is what a decision is made on. Key is required.
type Input struct {
	// Key is the authenticated virtual key.
	Key *keys.Principal
	// ApplianceID is app_<id> of the appliance serving the request.
	ApplianceID string
	// Time is when the request arrived; zero means now.
	Time    time.Time
	Request Request
	// keyOnce marks a Principal built for this call alone (the gRPC
	// service's): its Rego value is not cached, as caching it would keep
	// every caller's key until the cache empties (keyTerms).
	keyOnce bool
}

// effectiveToolChoice resolves an unspecified tool_choice to OpenAI's
// default for the request.
func (r *Request) effectiveToolChoice() ToolChoice {
	if r.ToolChoice.Mode != ToolChoiceUnspecified {
		return r.ToolChoice
	}
	if len(r.Tools) > 0 {
		return ToolChoice{Mode: ToolChoiceAuto}
	}
	return ToolChoice{Mode: ToolChoiceNone}
}
