package pipeline

import (
	"errors"

	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/audit/receipt"
)

// ReceiptHeader is the response header (HTTP) and header metadata key
// (gRPC) of a recorded reply's receipt: base64url, unpadded, of the
// receipt's JSON document (docs/audit-format.md, "Receipts").
const ReceiptHeader = "x-tollgate-receipt"

// Receipts serves the receipts of recorded events (audit/log.Log).
type Receipts interface {
	Receipt(tenant, requestID string) (receipt.Receipt, error)
}

// ReceiptHeaderValue is the value of ReceiptHeader for the call's recorded
// event: empty before it is recorded, or when the log gives no receipt
// (no signer). Each call builds it: a reply asks once.
func (c *Call) ReceiptHeaderValue() string {
	return c.receipt.Header()
}

// LoadReceipt returns the receipt JSON of a recorded request of the
// call's tenant. Another tenant's request, one not recorded, and one
// recorded without a receipt are one answer (KindNotFound), so that an id
// tells nothing of other tenants.
func (c *Call) LoadReceipt(requestID string) ([]byte, error) {
	src := c.p.cfg.Receipts
	if src == nil {
		return nil, errReceiptNotFound(requestID)
	}
	r, err := src.Receipt(c.principal.TenantID, requestID)
	switch {
	case errors.Is(err, auditlog.ErrNotFound), errors.Is(err, auditlog.ErrNoReceipt), errors.Is(err, auditlog.ErrInvalid):
		return nil, errReceiptNotFound(requestID)
	case err != nil:
		return nil, Internal(err)
	}
	return r.AppendJSON(nil), nil
}

func errReceiptNotFound(id string) *Error {
	return NotFound("no receipt for request %s", id)
}
