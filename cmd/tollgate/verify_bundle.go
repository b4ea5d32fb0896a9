package main

import (
	"bufio"
	"os"
	"strconv"

	"github.com/tollgate-dev/tollgate/central/verify"
)

// bundleVerdict summarises a verified evidence bundle: what an auditor
// archived (events, models, outcomes).
type bundleVerdict struct {
	Events        uint64            `json:"events"`
	Uncovered     uint64            `json:"uncovered"`
	Receipts      uint64            `json:"receipts"`
	LastSequence  uint64            `json:"last_sequence"`
	HeadSignedAt  string            `json:"head_signed_at"`
	BodiesPresent uint64            `json:"bodies_present"`
	BodiesPruned  uint64            `json:"bodies_pruned"`
	BodiesLost    uint64            `json:"bodies_lost"`
	Models        map[string]uint64 `json:"models"`
	Statuses      map[string]uint64 `json:"statuses"`
}

// verifyBundle checks an evidence bundle (tollgate verify bundle), read in
// one pass so that a day of any size verifies in bounded memory.
func verifyBundle(v *verdict, file, caFile string) error {
	in := stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return &verify.Error{Kind: verify.Input, Err: err}
		}
		defer f.Close()
		in = f
	}
	ca, err := verify.LoadCA(caFile)
	if err != nil {
		return err
	}
	s, err := verify.Bundle(bufio.NewReaderSize(in, 1<<20), ca)
	if err != nil {
		return err
	}
	v.TenantID, v.ApplianceID, v.Day = s.TenantID, s.ApplianceID, s.Day
	b := bundleVerdict{
		Events: s.Events, Uncovered: s.Uncovered, Receipts: s.Receipts,
		LastSequence: s.Head.LastSequence, HeadSignedAt: s.Head.SignedAt,
		BodiesPresent: s.BodiesPresent, BodiesPruned: s.BodiesPruned, BodiesLost: s.BodiesLost,
		Models: s.Models, Statuses: map[string]uint64{},
	}
	for code, n := range s.Statuses {
		b.Statuses[strconv.Itoa(code)] = n
	}
	v.Bundle = &b
	return nil
}
