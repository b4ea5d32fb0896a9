package pipeline

import (
	"testing"
	"time"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
)

func TestResponseStoreTenantsExpiryAndBound(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := NewResponseStore(time.Hour, 100)
	s.put("ten_a", "resp_1", StoredResponse{Body: []byte("0123456789"), History: []*inferencev1.Message{{Role: inferencev1.Role_ROLE_USER}}}, now)
	if _, ok := s.get("ten_a", "resp_1", now); !ok {
		t.Fatal("stored response not found")
	}
	if _, ok := s.get("ten_b", "resp_1", now); ok {
		t.Fatal("another tenant sees the response")
	}
	if s.delete("ten_b", "resp_1", now) {
		t.Fatal("another tenant deleted the response")
	}
	if _, ok := s.get("ten_a", "resp_1", now.Add(time.Hour)); ok {
		t.Fatal("response kept past its retention")
	}
	if s.bytes != 0 || s.order.Len() != 0 {
		t.Fatalf("expired entry still counted: %d bytes, %d entries", s.bytes, s.order.Len())
	}

	// The bound drops the oldest first; a response alone over it is not kept.
	s.put("ten_a", "resp_1", StoredResponse{Body: make([]byte, 60)}, now)
	s.put("ten_a", "resp_2", StoredResponse{Body: make([]byte, 60)}, now)
	if _, ok := s.get("ten_a", "resp_1", now); ok {
		t.Error("oldest response kept past the bound")
	}
	if _, ok := s.get("ten_a", "resp_2", now); !ok {
		t.Error("newest response dropped")
	}
	s.put("ten_a", "resp_3", StoredResponse{Body: make([]byte, 101)}, now)
	if _, ok := s.get("ten_a", "resp_3", now); ok {
		t.Error("a response over the whole bound was kept")
	}
	if !s.delete("ten_a", "resp_2", now) || s.bytes != 0 {
		t.Errorf("delete: %d bytes left", s.bytes)
	}
}
