#!/usr/bin/python3
"""An independent verifier of Tollgate's audit receipts.

Written from docs/audit-format.md ("Receipts") alone, beside
tollgate_verify.py, whose strict JSON, certificate and Merkle checks it
shares. It checks a receipt offline against the fleet CA certificate and,
given an inclusion proof document too, that the proof is of the leaf the
receipt promised:

    tollgate_receipt.py FILE --ca fleet-ca.pem [--proof PROOF]

FILE is the receipt's JSON or the value of its x-tollgate-receipt header
(unpadded base64url of the JSON). It prints one line of JSON, as
tollgate_verify.py does, and exits 0 when every check passed, 1 when one
failed, 2 on a usage or input error.
"""

import argparse
import base64
import binascii
import hashlib
import json
import re
import sys
import warnings

from cryptography import x509

import tollgate_verify as tv
from tollgate_verify import fail, Failure

SCHEMA = "tollgate-audit-receipt/v1"
RECEIPT_MEMBERS = ("schema", "request_id", "tenant_id", "appliance_id", "day", "sequence", "leaf_index", "time",
                   "leaf_hash", "batch_index", "batch_size", "batch_root", "batch_path", "signed_at", "signature",
                   "certificate")
TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")
MAX_BATCH = 1 << 16
MAX_PATH = 16


def document_bytes(data):
    """The receipt's JSON: data itself, or decoded from a header value."""
    data = data.strip()
    if data[:1] == b"{":
        return data
    try:
        text = data.decode("ascii")
        if not re.fullmatch(r"[A-Za-z0-9_-]*", text) or len(text) % 4 == 1:
            raise ValueError("not unpadded base64url")
        doc = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        if base64.urlsafe_b64encode(doc).decode().rstrip("=") != text:
            raise ValueError("not canonical")
    except (UnicodeDecodeError, ValueError, binascii.Error):
        fail("malformed", "neither a receipt's JSON nor its x-tollgate-receipt header value (unpadded base64url)")
    return doc


def read_receipt(data):
    doc = tv.members(tv.parse_json(document_bytes(data)), "receipt", RECEIPT_MEMBERS)
    r = {k: tv.string(doc, k, "receipt") for k in ("schema", "request_id", "tenant_id", "appliance_id", "day", "time",
                                                   "leaf_hash", "batch_root", "signed_at", "signature", "certificate")}
    for k in ("sequence", "leaf_index", "batch_index", "batch_size"):
        r[k] = tv.integer(doc, k, "receipt")
    # Canonical encodings first: no byte may change unnoticed.
    tv.hash32(r["leaf_hash"], "receipt.leaf_hash")
    tv.hash32(r["batch_root"], "receipt.batch_root")
    r["batch_path"] = tv.hashes_of(doc, "batch_path", "receipt", bounded=False)
    tv.signature_bytes(r["signature"], "receipt")
    tv.certificate_der(r["certificate"], "receipt")
    return r


def claim_bytes(r):
    """The claim's RFC 8785 canonical bytes: members in name order, no
    white space; every string is of characters that need no escape."""
    claim = {k: r[k] for k in ("appliance_id", "day", "leaf_hash", "leaf_index", "request_id", "sequence",
                               "tenant_id", "time")}
    claim["schema"] = SCHEMA
    return json.dumps(claim, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def statement_body(r):
    first = r["sequence"] - r["batch_index"]
    return ("tollgate-audit-receipts/v1/%s/%s\n%d\n%s\nfirst_sequence %d\nsigned_at %s\n" % (
        r["appliance_id"], r["day"], r["batch_size"], base64.b64encode(bytes.fromhex(r["batch_root"])).decode(),
        first, r["signed_at"])).encode()


def verify_receipt(r, ca):
    # 1. The format's rules.
    if r["schema"] != SCHEMA:
        fail("head_invalid", "schema %r" % r["schema"])
    for name, pattern in (("request_id", tv.REQUEST), ("tenant_id", tv.TENANT), ("appliance_id", tv.APPLIANCE)):
        if not pattern.fullmatch(r[name]):
            fail("head_invalid", "%s %r" % (name, r[name]))
    start = tv.parse_day(r["day"])
    if start is None:
        fail("head_invalid", "day %r is not a date" % r["day"])
    if r["sequence"] < 1:
        fail("head_invalid", "sequence 0")
    if r["leaf_index"] >= r["sequence"]:
        fail("head_invalid", "leaf_index %d is not below sequence %d" % (r["leaf_index"], r["sequence"]))
    if not TIME.fullmatch(r["time"]) or tv.parse_signed_at(r["time"][:19] + "Z") is None:
        fail("head_invalid", "time %r is not RFC 3339 UTC with microseconds" % r["time"])
    at = tv.parse_signed_at(r["signed_at"])
    if at is None:
        fail("head_invalid", "signed_at %r is not RFC 3339 UTC seconds with Z" % r["signed_at"])
    if at < start:
        fail("head_invalid", "signed_at %s is before its day %s" % (r["signed_at"], r["day"]))
    if not 1 <= r["batch_size"] <= MAX_BATCH:
        fail("head_invalid", "batch_size %d out of range [1, %d]" % (r["batch_size"], MAX_BATCH))
    if r["batch_index"] >= r["batch_size"]:
        fail("head_invalid", "batch_index %d is not below batch_size %d" % (r["batch_index"], r["batch_size"]))
    if r["batch_index"] >= r["sequence"]:
        fail("head_invalid", "batch_index %d is not below sequence %d" % (r["batch_index"], r["sequence"]))
    if len(r["batch_path"]) > MAX_PATH:
        fail("head_invalid", "batch_path of %d hashes" % len(r["batch_path"]))
    # 2. The certificate, as for a head.
    der = tv.certificate_der(r["certificate"], "receipt")
    try:
        cert = x509.load_der_x509_certificate(der)
        appliance = tv.check_certificate(cert, ca, at)
    except Failure:
        raise
    except Exception as e:  # a certificate the parser cannot read
        fail("certificate", "certificate: %s" % e)
    if appliance != r["appliance_id"]:
        fail("appliance_mismatch", "certificate is for %s, receipt is from %s" % (appliance, r["appliance_id"]))
    # 3. The claim at batch_index of the batch whose root is batch_root.
    claim_hash = hashlib.sha256(b"\x00" + claim_bytes(r)).digest()
    if not tv.verify_inclusion(r["batch_index"], r["batch_size"], claim_hash, r["batch_path"], bytes.fromhex(r["batch_root"])):
        fail("inclusion", "the claim is not in the batch")
    # 4. The signature over the batch statement, as for a head.
    if not tv.signature_verifies(cert, tv.signature_bytes(r["signature"], "receipt"), statement_body(r)):
        fail("signature", "the signature does not verify over the batch statement")


def receipt_document(data, ca):
    r = read_receipt(data)
    verify_receipt(r, ca)
    return {"tenant_id": r["tenant_id"], "appliance_id": r["appliance_id"], "day": r["day"],
            "request_id": r["request_id"], "sequence": r["sequence"], "leaf_index": r["leaf_index"]}


def proof_of_receipt(proof, receipt, ca):
    """Verifies the proof document and the receipt, and that the proof is of
    the leaf the receipt promised."""
    p = tv.proof_document(proof, ca)
    r = read_receipt(receipt)
    verify_receipt(r, ca)
    doc = json.loads(proof)
    for name, theirs in (("request_id", doc["request_id"]), ("sequence", doc["sequence"]),
                         ("appliance_id", doc["appliance_id"]), ("day", doc["day"]),
                         ("tenant_id", doc["head"]["tenant_id"]), ("leaf_index", doc["leaf_index"]),
                         ("leaf_hash", doc["leaf_hash"])):
        if theirs != r[name]:
            fail("leaf_mismatch", "the proof's %s is %r, the receipt's %r" % (name, theirs, r[name]))
    return dict(p, receipt_bound=True)


def verify(data, ca_pem, proof=None):
    """The verdict on a receipt (and a proof of it, when given)."""
    kind = "receipt" if proof is None else "proof"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ca = tv.load_ca(ca_pem)
        try:
            out = receipt_document(data, ca) if proof is None else proof_of_receipt(proof, data, ca)
        except Failure as e:
            return {"ok": False, "document": kind, "error": e.kind, "message": str(e)}
    return dict({"ok": True, "document": kind}, **out)


def main(argv):
    ap = argparse.ArgumentParser(description="Verify a Tollgate audit receipt offline against the fleet CA.")
    ap.add_argument("file", help="the receipt (JSON or header value), or - for standard input")
    ap.add_argument("--ca", required=True, help="PEM of the fleet CA certificate")
    ap.add_argument("--proof", help="an inclusion proof document that must be of the receipt's leaf")
    args = ap.parse_args(argv)
    try:
        if args.file == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(args.file, "rb") as f:
                data = f.read()
        with open(args.ca, "rb") as f:
            ca_pem = f.read()
        proof = None
        if args.proof:
            with open(args.proof, "rb") as f:
                proof = f.read()
        v = verify(data, ca_pem, proof)
    except (OSError, tv.UsageError) as e:
        print(json.dumps({"ok": False, "document": "receipt", "error": "input", "message": str(e)}))
        return 2
    print(json.dumps(v))
    return 0 if v["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
