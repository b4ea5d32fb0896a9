package sdk_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// openai-go retries 429 and 5xx by default (a mistyped model's 503 was
// sent three times); a mistyped model and a reservation the day cannot
// hold say x-should-retry: false, and the SDK sends each once.
func TestRefusalsNotRetried(t *testing.T) {
	base := start(t)
	for _, tc := range []struct {
		name, key string
		status    int
	}{
		{"mistyped model", allKey, http.StatusServiceUnavailable},
		{"default reservation over the day", "tgk_test_acme_small_day", http.StatusTooManyRequests},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attempts := 0
			count := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
				attempts++
				return next(r)
			})
			model := "builtin/echo"
			if tc.status == http.StatusServiceUnavailable {
				model = "builtin/ech0"
			}
			c := openai.NewClient(option.WithBaseURL(base), option.WithAPIKey(tc.key), option.WithMaxRetries(2), count)
			_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
			})
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status {
				t.Fatalf("error %v, want %d", err, tc.status)
			}
			if attempts != 1 {
				t.Errorf("%d attempts, want 1", attempts)
			}
		})
	}
}
