package policy

import (
	"time"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// sampleInput is the representative request a new bundle is evaluated on
// before it is accepted: a chat request offering one in-scope tool, with
// every optional field present, so that rules reading them are evaluated.
func sampleInput() *Input {
	temp, maxTokens, effort := 0.7, int64(256), "medium"
	return &Input{
		Key: keys.NewPrincipal("sample", "key_sample", "sample", true, nil, 0, 0,
			[]string{"tool:get_weather"}, time.Time{}),
		ApplianceID: "app_sample",
		Time:        time.Unix(0, 0).UTC(),
		Request: Request{
			ID:              "req_sample",
			Endpoint:        EndpointChatCompletions,
			Model:           "builtin/echo",
			Tools:           []string{"get_weather"},
			MessageCount:    1,
			Temperature:     &temp,
			MaxTokens:       &maxTokens,
			ReasoningEffort: &effort,
		},
	}
}
