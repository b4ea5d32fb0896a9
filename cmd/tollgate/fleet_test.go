package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/tollgate-dev/tollgate/audit/fleet"
)

// `tollgate fleet issue --key` chooses the appliance key's kind, Ed25519
// by default, and refuses a kind it does not know.
func TestFleetIssueKey(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want fleet.KeyKind
	}{
		{"default", nil, fleet.Ed25519},
		{"ed25519", []string{"--key", "ed25519"}, fleet.Ed25519},
		{"ecdsa-p256", []string{"--key", "ecdsa-p256"}, fleet.ECDSAP256},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pki, appDir := issueAppliance(t, t.TempDir(), "app_cmdkey", tt.args...)
			app, err := fleet.LoadAppliance(filepath.Join(appDir, fleet.ApplianceCertFile), filepath.Join(appDir, fleet.ApplianceKeyFile))
			if err != nil {
				t.Fatal(err)
			}
			if app.Kind != tt.want {
				t.Fatalf("issued a %s key, want %s", app.Kind, tt.want)
			}
			if _, err := fleet.LoadCA(filepath.Join(pki, fleet.CACertFile), filepath.Join(pki, fleet.CAKeyFile)); err != nil {
				t.Fatalf("the fleet CA no longer loads: %v", err)
			}
		})
	}
	t.Run("unknown kind", func(t *testing.T) {
		pki, _ := issueAppliance(t, t.TempDir(), "app_cmdkey")
		var out, errOut bytes.Buffer
		args := []string{"fleet", "issue", "--appliance", "app_cmdkey2", "--ca-dir", pki, "--out", t.TempDir(), "--key", "rsa"}
		if code := run(context.Background(), args, &out, &errOut); code != 2 || !bytes.Contains(errOut.Bytes(), []byte("rsa")) {
			t.Fatalf("--key rsa: exit %d, %s", code, errOut.String())
		}
	})
}
