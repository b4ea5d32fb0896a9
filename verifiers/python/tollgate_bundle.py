#!/usr/bin/python3
"""An independent verifier of Tollgate's evidence bundles.

Written from docs/audit-format.md ("The evidence bundle") alone, beside
tollgate_verify.py and tollgate_receipt.py, whose strict JSON, head,
leaf, Merkle and receipt checks it shares. It checks a bundle offline
against the fleet CA certificate:

    tollgate_bundle.py FILE --ca fleet-ca.pem

It prints one line of JSON, as tollgate_verify.py does, and exits 0 when
every check passed, 1 when one failed, 2 on a usage or input error. It
reads the whole bundle into memory (the format allows one pass; this
verifier does not need it).
"""

import argparse
import base64
import binascii
import hashlib
import json
import re
import sys
import warnings

import tollgate_receipt as tr
import tollgate_verify as tv
from tollgate_verify import fail, Failure

SCHEMA = "tollgate-audit-bundle/v1"
BUNDLE_MEMBERS = ("schema", "tenant_id", "appliance_id", "day", "exported_at", "head", "events", "uncovered")
EVENT_MEMBERS = ("leaf", "leaf_index", "audit_path", "bodies", "request_body", "response_body")
EXPORTED_AT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")


def read_event(obj, what, covered):
    required = EVENT_MEMBERS if covered else tuple(m for m in EVENT_MEMBERS if m != "audit_path")
    tv.members(obj, what, required, ("receipt",))
    ev = {k: tv.string(obj, k, what) for k in ("leaf", "bodies", "request_body", "response_body")}
    ev["leaf_index"] = tv.integer(obj, "leaf_index", what)
    leaf = ev["leaf"].encode("utf-8", "surrogatepass")
    if len(leaf) > tv.MAX_LEAF:
        fail("malformed", "%s.leaf is longer than %d bytes" % (what, tv.MAX_LEAF))
    if not leaf:
        fail("malformed", "%s.leaf is empty" % what)
    ev["leaf"] = leaf
    if covered:
        ev["audit_path"] = tv.hashes_of(obj, "audit_path", what, bounded=False)
    if "receipt" in obj:
        # The receipt object, read as its own document is.
        ev["receipt"] = tr.read_receipt(json.dumps(obj["receipt"], ensure_ascii=False).encode("utf-8", "surrogatepass"))
    return ev


def read_bundle(data):
    doc = tv.parse_json(data)
    tv.members(doc, "bundle", BUNDLE_MEMBERS)
    if tuple(doc) != BUNDLE_MEMBERS:
        fail("malformed", "bundle: members out of order: %s" % ", ".join(doc))
    b = {k: tv.string(doc, k, "bundle") for k in ("schema", "tenant_id", "appliance_id", "day", "exported_at")}
    b["head"] = tv.read_head(doc["head"], "bundle.head")
    for name, covered in (("events", True), ("uncovered", False)):
        if not isinstance(doc[name], list):
            fail("malformed", "bundle.%s is not a list" % name)
        b[name] = [read_event(e, "bundle.%s[%d]" % (name, i), covered) for i, e in enumerate(doc[name])]
    if b["schema"] != SCHEMA:
        fail("malformed", "bundle.schema is %r, not %r" % (b["schema"], SCHEMA))
    if not EXPORTED_AT.fullmatch(b["exported_at"]) or tv.parse_signed_at(b["exported_at"]) is None:
        fail("malformed", "bundle.exported_at %r is not RFC 3339 UTC" % b["exported_at"])
    return b


def leaf_of(leaf):
    """Step 3.1: a strict canonical leaf (its own names bind nothing yet)."""
    obj = tv._leaf_json(leaf)
    own = {"request_id": obj["request_id"], "sequence": obj["sequence"], "appliance_id": obj["appliance_id"]}
    tv.check_leaf(leaf, hashlib.sha256(b"\x00" + leaf).digest(), own, {"tenant_id": obj["tenant_id"]})
    return obj


def check_bodies(ev, leaf, summary):
    """Step 3.4."""
    if ev["bodies"] == "present":
        for name, digest in (("request_body", leaf["request_sha256"]), ("response_body", leaf["response_sha256"])):
            text = ev[name]
            try:
                raw = base64.b64decode(text.encode("ascii"), validate=True)
            except (UnicodeEncodeError, ValueError, binascii.Error):
                fail("malformed", "%s is not canonical standard base64" % name)
            if base64.b64encode(raw).decode() != text:
                fail("malformed", "%s is not canonical standard base64" % name)
            got = hashlib.sha256(raw).hexdigest()
            if got != digest:
                fail("body_mismatch", "%s hashes to %s, the leaf's digest is %s" % (name, got, digest))
        summary["bodies_present"] += 1
    elif ev["bodies"] in ("pruned", "lost"):
        if ev["request_body"] or ev["response_body"]:
            fail("malformed", "bodies %r with a body" % ev["bodies"])
        summary["bodies_" + ev["bodies"]] += 1
    else:
        fail("malformed", "bodies is %r, not present, pruned or lost" % ev["bodies"])


def check_event(ev, i, covered, h, ca, state, summary):
    leaf = leaf_of(ev["leaf"])
    rid, seq = leaf["request_id"], leaf["sequence"]
    want = i if covered else h["event_count"] + i
    if ev["leaf_index"] != want:
        fail("incomplete", "%s is at leaf_index %d where leaf %d belongs" % (rid, ev["leaf_index"], want))
    if seq <= state["last"]:
        fail("incomplete", "%s has sequence %d, not after the previous event's %d" % (rid, seq, state["last"]))
    if not covered and seq <= h["last_sequence"]:
        fail("incomplete", "%s has sequence %d within the head's last_sequence %d" % (rid, seq, h["last_sequence"]))
    state["last"] = seq
    leaf_hash = hashlib.sha256(b"\x00" + ev["leaf"]).digest()
    p = {"appliance_id": h["appliance_id"], "day": h["day"], "request_id": rid, "sequence": seq,
         "leaf_index": ev["leaf_index"], "tree_size": h["event_count"]}
    if covered:
        # "The inclusion proof document", steps 3 to 5.
        if p["leaf_index"] >= p["tree_size"]:
            fail("proof_mismatch", "leaf_index %d outside a tree of %d leaves" % (p["leaf_index"], p["tree_size"]))
        if seq <= p["leaf_index"] or seq > h["last_sequence"]:
            fail("proof_mismatch", "sequence %d impossible for leaf %d" % (seq, p["leaf_index"]))
        if p["leaf_index"] == p["tree_size"] - 1 and seq != h["last_sequence"]:
            fail("proof_mismatch", "the last leaf has sequence %d, not last_sequence %d" % (seq, h["last_sequence"]))
        if not tv.verify_inclusion(p["leaf_index"], p["tree_size"], leaf_hash, ev["audit_path"], bytes.fromhex(h["merkle_root"])):
            fail("inclusion", "%s: the audit path does not lead from its leaf hash to the head's root" % rid)
    tv.check_leaf(ev["leaf"], leaf_hash, p, h)
    check_bodies(ev, leaf, summary)
    r = ev.get("receipt")
    if r is not None:
        tr.verify_receipt(r, ca)
        for name, ours in (("request_id", rid), ("sequence", seq), ("appliance_id", h["appliance_id"]), ("day", h["day"]),
                           ("tenant_id", h["tenant_id"]), ("leaf_index", ev["leaf_index"]), ("leaf_hash", leaf_hash.hex())):
            if r[name] != ours:
                fail("leaf_mismatch", "%s: the receipt's %s is %r, the event's %r" % (rid, name, r[name], ours))
        if r["time"] != leaf["time"]:
            fail("leaf_mismatch", "%s: the receipt's time is %s, the leaf's %s" % (rid, r["time"], leaf["time"]))
        summary["receipts"] += 1
    summary["events" if covered else "uncovered"] += 1
    summary["models"][leaf["model"]] = summary["models"].get(leaf["model"], 0) + 1
    st = str(leaf["status"])
    summary["statuses"][st] = summary["statuses"].get(st, 0) + 1


def bundle_document(data, ca):
    b = read_bundle(data)
    h = b["head"]
    tv.verify_head(h, ca)
    if (b["tenant_id"], b["appliance_id"], b["day"]) != (h["tenant_id"], h["appliance_id"], h["day"]):
        fail("proof_mismatch", "the bundle is of %s/%s/%s, its head of %s/%s/%s" % (
            b["tenant_id"], b["appliance_id"], b["day"], h["tenant_id"], h["appliance_id"], h["day"]))
    summary = {"events": 0, "uncovered": 0, "receipts": 0, "last_sequence": h["last_sequence"],
               "head_signed_at": h["signed_at"], "bodies_present": 0, "bodies_pruned": 0, "bodies_lost": 0,
               "models": {}, "statuses": {}}
    state = {"last": 0}
    for i, ev in enumerate(b["events"]):
        try:
            check_event(ev, i, True, h, ca, state, summary)
        except Failure as e:
            fail(e.kind, "bundle.events[%d]: %s" % (i, e))
    if summary["events"] != h["event_count"]:
        fail("incomplete", "the head covers %d events, the bundle holds %d" % (h["event_count"], summary["events"]))
    for j, ev in enumerate(b["uncovered"]):
        try:
            check_event(ev, j, False, h, ca, state, summary)
        except Failure as e:
            fail(e.kind, "bundle.uncovered[%d]: %s" % (j, e))
    return {"tenant_id": h["tenant_id"], "appliance_id": h["appliance_id"], "day": h["day"], "bundle": summary}


def verify(data, ca_pem):
    """The verdict on a bundle."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ca = tv.load_ca(ca_pem)
        try:
            out = bundle_document(data, ca)
        except Failure as e:
            return {"ok": False, "document": "bundle", "error": e.kind, "message": str(e)}
    return dict({"ok": True, "document": "bundle"}, **out)


def main(argv):
    ap = argparse.ArgumentParser(description="Verify a Tollgate evidence bundle offline against the fleet CA.")
    ap.add_argument("file", help="the bundle, or - for standard input")
    ap.add_argument("--ca", required=True, help="PEM of the fleet CA certificate")
    args = ap.parse_args(argv)
    try:
        if args.file == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(args.file, "rb") as f:
                data = f.read()
        with open(args.ca, "rb") as f:
            ca_pem = f.read()
        v = verify(data, ca_pem)
    except (OSError, tv.UsageError) as e:
        print(json.dumps({"ok": False, "document": "bundle", "error": "input", "message": str(e)}))
        return 2
    print(json.dumps(v))
    return 0 if v["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
