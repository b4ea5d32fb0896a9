package tollgatetest

import (
	"io"
	"strings"
	"testing"
)

func TestBanner(t *testing.T) {
	const banner = "Tollgate dev is up.\n  Base URL:  http://127.0.0.1:4000/v1\n  gRPC:      127.0.0.1:4001\n  Metrics:   http://127.0.0.1:4002/metrics\nlater output\n"
	tests := []struct {
		name    string
		want    []string
		got     map[string]string
		wantErr bool
	}{
		{"two labels", []string{"Base URL", "Metrics"}, map[string]string{"Base URL": "http://127.0.0.1:4000/v1", "Metrics": "http://127.0.0.1:4002/metrics"}, false},
		{"one label", []string{"gRPC"}, map[string]string{"gRPC": "127.0.0.1:4001"}, false},
		{"a label never printed", []string{"Base URL", "Central"}, map[string]string{"Base URL": "http://127.0.0.1:4000/v1"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			go func() {
				_, _ = io.Copy(pw, strings.NewReader(banner))
				_ = pw.Close()
			}()
			got, err := Banner(pr, tt.want...)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if len(got) != len(tt.got) {
				t.Fatalf("got %v, want %v", got, tt.got)
			}
			for k, v := range tt.got {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}
