package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/tollgate-dev/tollgate/central/verify"
)

// runVerify checks a head, proof, consistency or forks document of the
// central plane's audit API offline:
//
//	tollgate verify head FILE --ca fleet-ca.pem
//	tollgate verify proof FILE --ca fleet-ca.pem [--leaf LEAF] [--receipt RECEIPT]
//	tollgate verify consistency FILE --ca fleet-ca.pem
//	tollgate verify fork FILE --ca fleet-ca.pem
//	tollgate verify receipt FILE --ca fleet-ca.pem
//
// FILE is what the REST API returned, or - for standard input. It prints
// one line of JSON, the verdict, and exits 0 when every check passed, else
// with the code of the failure's kind (docs/central.md).
func runVerify(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tollgate verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	caFile := fs.String("ca", "", "PEM of the fleet CA certificate (required)")
	leafFile := fs.String("leaf", "", "proof only: the canonical leaf of the event (as the appliance's AuditService.GetEvent returns it), which must be the proven leaf; needed when the proof carries none")
	receiptFile := fs.String("receipt", "", "proof only: a receipt of the event (its JSON or x-tollgate-receipt header value); the proof must be of the leaf it promised")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: tollgate verify head|proof|consistency|fork|receipt|bundle FILE --ca fleet-ca.pem [--leaf LEAF] [--receipt RECEIPT]\n\nFILE is a document of the audit API, a receipt, an evidence bundle (tollgate audit export), or - for standard input.")
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	var problem string
	switch {
	case len(pos) != 2 || !slices.Contains([]string{"head", "proof", "consistency", "fork", "receipt", "bundle"}, pos[0]):
		problem = "want head, proof, consistency, fork, receipt or bundle, then FILE"
	case *caFile == "":
		problem = "--ca is required"
	case *leafFile != "" && pos[0] != "proof":
		problem = "--leaf goes with proof only"
	case *receiptFile != "" && pos[0] != "proof":
		problem = "--receipt goes with proof only"
	}
	if problem != "" {
		fmt.Fprintf(stderr, "tollgate verify: %s\n", problem)
		fs.Usage()
		return errUsage
	}
	v := verdict{Document: pos[0]}
	switch pos[0] {
	case "receipt":
		err = verifyReceipt(&v, pos[1], *caFile)
	case "bundle":
		err = verifyBundle(&v, pos[1], *caFile)
	default:
		err = verifyDocument(&v, pos[0], pos[1], *caFile, *leafFile, *receiptFile)
	}
	if err != nil {
		k := verify.KindOf(err)
		if k == 0 {
			return err
		}
		v.Error, v.ExitCode, v.Message = k.String(), k.ExitCode(), errors.Unwrap(err).Error()
	}
	v.OK = err == nil
	line, _ := json.Marshal(v)
	fmt.Fprintf(stdout, "%s\n", line)
	if err != nil {
		return exitCode(v.ExitCode)
	}
	return nil
}

// verdict is the one-line JSON result.
type verdict struct {
	OK          bool    `json:"ok"`
	Document    string  `json:"document"`
	Error       string  `json:"error,omitempty"`
	ExitCode    int     `json:"exit_code"`
	Message     string  `json:"message,omitempty"`
	Heads       *int    `json:"heads,omitempty"`
	TenantID    string  `json:"tenant_id,omitempty"`
	ApplianceID string  `json:"appliance_id,omitempty"`
	Day         string  `json:"day,omitempty"`
	RequestID   string  `json:"request_id,omitempty"`
	LeafIndex   *uint64 `json:"leaf_index,omitempty"`
	TreeSize    *uint64 `json:"tree_size,omitempty"`
	LeafBound   *bool   `json:"leaf_bound,omitempty"`
	// ReceiptBound: a proof was checked against a receipt (--receipt).
	ReceiptBound *bool `json:"receipt_bound,omitempty"`
	// Sequence is a receipt's.
	Sequence *uint64 `json:"sequence,omitempty"`
	// FromSize and ToSize are a consistency proof's sizes.
	FromSize *uint64 `json:"from_size,omitempty"`
	ToSize   *uint64 `json:"to_size,omitempty"`
	// Forks is what each fork of a forks document proved.
	Forks *[]forkVerdict `json:"forks,omitempty"`
	// Bundle is what a verified evidence bundle holds.
	Bundle *bundleVerdict `json:"bundle,omitempty"`
}

// forkVerdict is what a verified fork proved: the appliance's key signed
// two views of the tenant's tree of the day, of signed_events and
// stored_events leaves, that disagree at signed_events leaves (by their
// roots when of one size, else by the consistency proof from the stored
// root: from_nodes).
type forkVerdict struct {
	Number       uint64 `json:"number"`
	TenantID     string `json:"tenant_id"`
	ApplianceID  string `json:"appliance_id"`
	Day          string `json:"day"`
	SignedEvents uint64 `json:"signed_events"`
	StoredEvents uint64 `json:"stored_events"`
	FromNodes    bool   `json:"from_nodes"`
}

func verifyDocument(v *verdict, kind, file, caFile, leafFile, receiptFile string) error {
	data, err := readInput(file)
	if err != nil {
		return &verify.Error{Kind: verify.Input, Err: err}
	}
	ca, err := verify.LoadCA(caFile)
	if err != nil {
		return err
	}
	if kind == "head" {
		heads, err := verify.HeadsDocument(data, ca)
		if err == nil {
			n := len(heads)
			v.Heads = &n
		}
		return err
	}
	if kind == "consistency" {
		c, err := verify.ConsistencyDocument(data, ca)
		if err == nil {
			v.TenantID, v.ApplianceID, v.Day = c.FromHead.TenantID, c.ApplianceID, c.Day
			v.FromSize, v.ToSize = &c.FromSize, &c.ToSize
		}
		return err
	}
	if kind == "fork" {
		forks, err := verify.ForksDocument(data, ca)
		if err == nil {
			out := make([]forkVerdict, len(forks))
			for i, f := range forks {
				out[i] = forkVerdict{
					Number: f.Number, TenantID: f.TenantID, ApplianceID: f.ApplianceID, Day: f.Day,
					SignedEvents: f.SignedHead.EventCount, StoredEvents: f.StoredHead.EventCount, FromNodes: f.FromNodes,
				}
			}
			v.Forks = &out
		}
		return err
	}
	var leafBytes []byte
	if leafFile != "" {
		if leafBytes, err = os.ReadFile(leafFile); err != nil {
			return &verify.Error{Kind: verify.Input, Err: fmt.Errorf("leaf: %w", err)}
		}
		leafBytes = bytes.TrimSuffix(leafBytes, []byte("\n"))
	}
	p, err := verify.ProofDocument(data, ca, leafBytes)
	if err == nil && receiptFile != "" {
		err = proofOfReceipt(p, receiptFile, ca)
		bound := err == nil
		v.ReceiptBound = &bound
	}
	if err == nil {
		bound := true // BindLeaf passed: the proof's leaf, or the one given, binds it
		v.TenantID, v.ApplianceID, v.Day, v.RequestID = p.Head.TenantID, p.ApplianceID, p.Day, p.RequestID
		v.LeafIndex, v.TreeSize, v.LeafBound = &p.LeafIndex, &p.TreeSize, &bound
	}
	return err
}

// maxDocument bounds what verify reads.
const maxDocument = 64 << 20

// stdin is what FILE "-" reads (tests replace it).
var stdin io.Reader = os.Stdin

func readInput(file string) ([]byte, error) {
	r := stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxDocument+1))
	if err == nil && len(data) > maxDocument {
		err = fmt.Errorf("document larger than %d bytes", maxDocument)
	}
	return data, err
}

// parseInterspersed parses flags placed before, between or after the
// positional arguments, which it returns.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// exitCode is an error whose exit status the command chose; its output is
// already written.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// ExitCode is the process exit status.
func (e exitCode) ExitCode() int { return int(e) }
