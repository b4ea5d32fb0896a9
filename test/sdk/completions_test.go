package sdk_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Legacy completions through openai-go: builtin/echo echoes the prompt,
// plain and streamed.
func TestCompletions(t *testing.T) {
	base := start(t)
	var resp *http.Response
	c, err := client(base, allKey).Completions.New(context.Background(), openai.CompletionNewParams{
		Model:     "builtin/echo",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("hello big world")},
		MaxTokens: openai.Int(16),
	}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if c.Object != "text_completion" || len(c.Choices) != 1 || c.Choices[0].Text != "hello big world" || c.Choices[0].FinishReason != "stop" {
		t.Errorf("completion %s", c.RawJSON())
	}
	if c.Usage.CompletionTokens != 3 || c.Usage.TotalTokens != c.Usage.PromptTokens+3 {
		t.Errorf("usage %+v", c.Usage)
	}
	if got := resp.Header.Get("x-request-id"); got != c.ID {
		t.Errorf("x-request-id %q, completion id %q", got, c.ID)
	}

	stream := client(base, allKey).Completions.NewStreaming(context.Background(), openai.CompletionNewParams{
		Model:         "builtin/echo",
		Prompt:        openai.CompletionNewParamsPromptUnion{OfArrayOfStrings: []string{"one two three"}},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var text strings.Builder
	var finish string
	var total int64
	for stream.Next() {
		ch := stream.Current()
		for _, choice := range ch.Choices {
			text.WriteString(choice.Text)
			if choice.FinishReason != "" {
				finish = string(choice.FinishReason)
			}
		}
		if ch.Usage.TotalTokens > 0 {
			total = ch.Usage.TotalTokens
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != "one two three" || finish != "stop" || total == 0 {
		t.Errorf("streamed %q, finish %q, total tokens %d", text.String(), finish, total)
	}
}
