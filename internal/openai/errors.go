package openai

// ErrorResponse is the error envelope: the body of an error reply, and the
// event that ends a stream failing after it started.
type ErrorResponse struct {
	Error *APIError `json:"error"`
}

// APIError is the gateway's error object: OpenAI's code, message, type
// and param (code first, a string), with the request's id and, for a
// policy's denial, its decision's id (docs/gateway-api.md, "Errors").
type APIError struct {
	Code             string `json:"code"`
	Message          string `json:"message"`
	Type             string `json:"type"`
	RequestID        string `json:"request_id"`
	Param            string `json:"param,omitempty"`
	PolicyDecisionID string `json:"policy_decision_id,omitempty"`
}
