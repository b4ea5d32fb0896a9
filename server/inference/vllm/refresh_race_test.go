package vllm_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tollgate-dev/tollgate/server/inference/vllm"
)

// Two model-list reads that finish out of order (the periodic one slow,
// a re-read after a 404 quick): the later read's answer stands, and a
// model the server dropped is not listed again by the earlier one.
func TestLaterModelListStands(t *testing.T) {
	var calls atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			close(entered)
			<-release // the first read answers last, with the old list
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
			return
		}
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
	}))
	defer srv.Close()
	e, err := vllm.New(vllm.Config{Namespace: "gpu", URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := e.Refresh(t.Context()); err != nil {
			t.Error(err)
		}
	})
	<-entered
	if err := e.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	close(release)
	wg.Wait()
	if got := e.Models(); len(got) != 0 {
		t.Fatalf("models %v after the later read listed none", got)
	}
}
