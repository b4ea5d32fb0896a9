package main

import (
	"crypto/x509"
	"fmt"
	"os"

	"github.com/tollgate-dev/tollgate/central/verify"
)

// maxReceipt bounds a receipt file: a receipt is a few KiB.
const maxReceipt = 1 << 20

// verifyReceipt checks a receipt on its own (tollgate verify receipt).
func verifyReceipt(v *verdict, file, caFile string) error {
	data, err := readInput(file)
	if err != nil {
		return &verify.Error{Kind: verify.Input, Err: err}
	}
	ca, err := verify.LoadCA(caFile)
	if err != nil {
		return err
	}
	r, err := verify.ReceiptDocument(data, ca)
	if err == nil {
		v.TenantID, v.ApplianceID, v.Day, v.RequestID = r.TenantID, r.ApplianceID, r.Day, r.RequestID
		v.Sequence, v.LeafIndex = &r.Sequence, &r.LeafIndex
	}
	return err
}

// proofOfReceipt verifies the receipt in file and that the verified proof
// p is for the leaf it promised (--receipt).
func proofOfReceipt(p verify.ProofDoc, file string, ca *x509.Certificate) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return &verify.Error{Kind: verify.Input, Err: fmt.Errorf("receipt: %w", err)}
	}
	if len(data) > maxReceipt {
		return &verify.Error{Kind: verify.Input, Err: fmt.Errorf("receipt: larger than %d bytes", maxReceipt)}
	}
	r, err := verify.ReceiptDocument(data, ca)
	if err != nil {
		return err
	}
	return verify.ProofOfReceipt(p, r)
}
