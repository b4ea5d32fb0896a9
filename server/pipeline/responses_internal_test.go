package pipeline

import (
	"testing"
	"time"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
)

func TestResponseStoreTenantsExpiryAndBound(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := NewMemoryResponseStore(time.Hour, 100)
	_ = s.Put("ten_a", "resp_1", StoredResponse{Body: []byte("0123456789"), History: []*inferencev1.Message{{Role: inferencev1.Role_ROLE_USER}}}, now)
	if _, ok, _ := s.Get("ten_a", "resp_1", now); !ok {
		t.Fatal("stored response not found")
	}
	if _, ok, _ := s.Get("ten_b", "resp_1", now); ok {
		t.Fatal("another tenant sees the response")
	}
	if ok, _ := s.Delete("ten_b", "resp_1", now); ok {
		t.Fatal("another tenant deleted the response")
	}
	if _, ok, _ := s.Get("ten_a", "resp_1", now.Add(time.Hour)); ok {
		t.Fatal("response kept past its retention")
	}
	if s.bytes != 0 || s.order.Len() != 0 {
		t.Fatalf("expired entry still counted: %d bytes, %d entries", s.bytes, s.order.Len())
	}

	// The bound drops the oldest first; a response alone over it is not kept.
	_ = s.Put("ten_a", "resp_1", StoredResponse{Body: make([]byte, 60)}, now)
	_ = s.Put("ten_a", "resp_2", StoredResponse{Body: make([]byte, 60)}, now)
	if _, ok, _ := s.Get("ten_a", "resp_1", now); ok {
		t.Error("oldest response kept past the bound")
	}
	if _, ok, _ := s.Get("ten_a", "resp_2", now); !ok {
		t.Error("newest response dropped")
	}
	_ = s.Put("ten_a", "resp_3", StoredResponse{Body: make([]byte, 101)}, now)
	if _, ok, _ := s.Get("ten_a", "resp_3", now); ok {
		t.Error("a response over the whole bound was kept")
	}
	if ok, _ := s.Delete("ten_a", "resp_2", now); !ok || s.bytes != 0 {
		t.Errorf("delete: %d bytes left", s.bytes)
	}
}
