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

// Several prompts in one request, as openai-go sends them (the prompt
// union's array of strings): a choice per prompt, by index, plain and
// streamed.
func TestCompletionsSeveralPrompts(t *testing.T) {
	base := start(t)
	prompts := []string{"hello big world", "one two", "x"}
	c, err := client(base, allKey).Completions.New(context.Background(), openai.CompletionNewParams{
		Model:  "builtin/echo",
		Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfStrings: prompts},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Choices) != len(prompts) {
		t.Fatalf("%d choices for %d prompts: %s", len(c.Choices), len(prompts), c.RawJSON())
	}
	for i, choice := range c.Choices {
		if choice.Index != int64(i) || choice.Text != prompts[i] || choice.FinishReason != "stop" {
			t.Errorf("choice %d: index %d, text %q, finish %q", i, choice.Index, choice.Text, choice.FinishReason)
		}
	}
	if c.Usage.PromptTokens != 6 || c.Usage.CompletionTokens != 6 || c.Usage.TotalTokens != 12 {
		t.Errorf("usage %+v, want 6+6 summed over the prompts", c.Usage)
	}

	stream := client(base, allKey).Completions.NewStreaming(context.Background(), openai.CompletionNewParams{
		Model:  "builtin/echo",
		Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfStrings: prompts},
	})
	texts := make([]strings.Builder, len(prompts))
	finished := 0
	for stream.Next() {
		for _, choice := range stream.Current().Choices {
			if choice.Index < 0 || int(choice.Index) >= len(prompts) {
				t.Fatalf("chunk of choice %d", choice.Index)
			}
			texts[choice.Index].WriteString(choice.Text)
			if choice.FinishReason != "" {
				finished++
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	for i := range prompts {
		if texts[i].String() != prompts[i] {
			t.Errorf("streamed choice %d: %q, want %q", i, texts[i].String(), prompts[i])
		}
	}
	if finished != len(prompts) {
		t.Errorf("%d finish reasons for %d prompts", finished, len(prompts))
	}
}
