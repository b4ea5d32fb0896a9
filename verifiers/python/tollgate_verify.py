#!/usr/bin/python3
"""An independent verifier of Tollgate's audit documents.

Written from docs/audit-format.md alone, with the Python standard library
and the `cryptography` package (Debian's python3-cryptography), so that
nothing of Tollgate's own code is trusted. It checks, offline, against the
fleet CA certificate:

  head         a heads document (a page of the heads list or of a tree's
               history) or one signed head
  proof        an inclusion proof document
  consistency  a consistency proof document

    tollgate_verify.py head|proof|consistency FILE --ca fleet-ca.pem [--leaf LEAF]

LEAF, for a proof, is the event's canonical leaf from the appliance:
needed when the proof carries none.

It prints one line of JSON, {"ok": true, ...} or {"ok": false, "error":
KIND, "message": ...}, and exits 0 when every check passed, 1 when one
failed, 2 on a usage or input error.
"""

import argparse
import base64
import binascii
import datetime
import hashlib
import json
import re
import sys
import warnings

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import ExtensionOID, NameOID

# Identifiers ("Identifiers").
TENANT = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
APPLIANCE = re.compile(r"app_[A-Za-z0-9_-]{1,64}")
REQUEST = re.compile(r"req_[A-Za-z0-9]{1,64}")
KEY = re.compile(r"key_[A-Za-z0-9]{1,64}")
DECISION = re.compile(r"dec_[A-Za-z0-9]{1,64}")
DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
SIGNED_AT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
HEX32 = re.compile(r"[0-9a-f]{64}")
CANONICAL_INT = re.compile(r"0|[1-9][0-9]*")
MAX_INT = 2**53 - 1
MAX_HASHES = 64

# The empty tree's root ("Trees").
EMPTY_ROOT = hashlib.sha256(b"").hexdigest()

HEAD_MEMBERS = ("tenant_id", "appliance_id", "day", "event_count", "last_sequence",
                "merkle_root", "signature", "signed_at", "certificate")


class Failure(Exception):
    """A check failed; kind names which."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


def fail(kind, message):
    raise Failure(kind, message)


# Strict JSON ("Reading a document strictly").

def _no_float(s):
    fail("malformed", "number %s is not an integer without sign, fraction or exponent" % s)


def _int(s):
    if not CANONICAL_INT.fullmatch(s):
        fail("malformed", "number %s is not an integer without sign, fraction or exponent" % s)
    n = int(s)
    if n > MAX_INT:
        fail("malformed", "integer %s is above 2^53-1" % s)
    return n


def _constant(s):
    fail("malformed", "%s is not JSON" % s)


def _pairs(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            fail("malformed", "member %r appears twice" % k)
        out[k] = v
    return out


def parse_json(data):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        fail("malformed", "the document is not UTF-8")
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_float=_no_float,
                          parse_int=_int, parse_constant=_constant)
    except ValueError as e:
        fail("malformed", "not JSON: %s" % e)


def members(obj, what, required, optional=()):
    if not isinstance(obj, dict):
        fail("malformed", "%s is not an object" % what)
    for k in obj:
        if k not in required and k not in optional:
            fail("malformed", "%s: unknown member %r" % (what, k))
    for k in required:
        if k not in obj:
            fail("malformed", "%s: member %r is missing" % (what, k))
    return obj


def string(obj, name, what):
    v = obj[name]
    if not isinstance(v, str):
        fail("malformed", "%s.%s is not a string" % (what, name))
    return v


def integer(obj, name, what):
    v = obj[name]
    if type(v) is not int:
        fail("malformed", "%s.%s is not an integer" % (what, name))
    return v


def hash32(s, what):
    if not isinstance(s, str) or not HEX32.fullmatch(s):
        fail("malformed", "%s is not 32 bytes of lowercase hex" % what)
    return bytes.fromhex(s)


def hashes_of(obj, name, what, bounded=True):
    v = obj[name]
    if not isinstance(v, list):
        fail("malformed", "%s.%s is not a list" % (what, name))
    if bounded and len(v) > MAX_HASHES:
        fail("malformed", "%s.%s holds %d hashes, at most %d" % (what, name, len(v), MAX_HASHES))
    return [hash32(h, "%s.%s[%d]" % (what, name, i)) for i, h in enumerate(v)]


# Heads ("Signed heads", "Verifying a head").

def read_head(obj, what):
    members(obj, what, HEAD_MEMBERS)
    h = {k: string(obj, k, what) for k in ("tenant_id", "appliance_id", "day", "merkle_root",
                                           "signature", "signed_at", "certificate")}
    h["event_count"] = integer(obj, "event_count", what)
    h["last_sequence"] = integer(obj, "last_sequence", what)
    # Canonical encodings: no byte of a head may change without its
    # meaning changing.
    hash32(h["merkle_root"], what + ".merkle_root")
    signature_bytes(h["signature"], what)
    certificate_der(h["certificate"], what)
    return h


def signature_bytes(s, what):
    try:
        b = base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        b = b""
    if not b or base64.b64encode(b).decode() != s:
        fail("malformed", "%s.signature is not canonical standard base64" % what)
    return b


def certificate_der(pem, what):
    m = re.fullmatch(r"-----BEGIN CERTIFICATE-----\n((?:[A-Za-z0-9+/=]{1,64}\n)+)-----END CERTIFICATE-----\n", pem)
    der = b""
    if m:
        try:
            der = base64.b64decode(m.group(1).replace("\n", ""), validate=True)
        except (binascii.Error, ValueError):
            der = b""
    if not der or pem_of(der) != pem:
        fail("malformed", "%s.certificate is not exactly one canonical CERTIFICATE PEM block" % what)
    return der


def pem_of(der):
    b64 = base64.b64encode(der).decode()
    lines = [b64[i:i + 64] for i in range(0, len(b64), 64)]
    return "-----BEGIN CERTIFICATE-----\n" + "".join(l + "\n" for l in lines) + "-----END CERTIFICATE-----\n"


def parse_day(day):
    if not DAY.fullmatch(day):
        return None
    try:
        return datetime.datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return None


def parse_signed_at(s):
    if not SIGNED_AT.fullmatch(s):
        return None
    try:
        return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return None


def checkpoint_body(h):
    root = bytes.fromhex(h["merkle_root"])
    return ("tollgate-audit/v1/%s/%s/%s\n%d\n%s\nlast_sequence %d\nsigned_at %s\n" % (
        h["tenant_id"], h["appliance_id"], h["day"], h["event_count"],
        base64.b64encode(root).decode(), h["last_sequence"], h["signed_at"])).encode()


def verify_head(h, ca):
    # 1. Every member's format and the format's rules.
    if not TENANT.fullmatch(h["tenant_id"]):
        fail("head_invalid", "tenant_id %r" % h["tenant_id"])
    if not APPLIANCE.fullmatch(h["appliance_id"]):
        fail("head_invalid", "appliance_id %r" % h["appliance_id"])
    start = parse_day(h["day"])
    if start is None:
        fail("head_invalid", "day %r is not a date" % h["day"])
    at = parse_signed_at(h["signed_at"])
    if at is None:
        fail("head_invalid", "signed_at %r is not RFC 3339 UTC seconds with Z" % h["signed_at"])
    if at < start:
        fail("head_invalid", "signed_at %s is before its day %s" % (h["signed_at"], h["day"]))
    if h["event_count"] > h["last_sequence"]:
        fail("head_invalid", "event_count %d exceeds last_sequence %d" % (h["event_count"], h["last_sequence"]))
    if h["event_count"] == 0 and (h["last_sequence"] != 0 or h["merkle_root"] != EMPTY_ROOT):
        fail("head_invalid", "an empty tree has last_sequence 0 and the empty root")
    # 2. The certificate: issued by the fleet CA, valid at signed_at, an
    # appliance certificate naming appliance_id, an Ed25519 or ECDSA P-256
    # key.
    der = certificate_der(h["certificate"], "head")
    try:
        cert = x509.load_der_x509_certificate(der)
        appliance = check_certificate(cert, ca, at)
    except Failure:
        raise
    except Exception as e:  # the parser's many errors: a certificate it cannot read
        fail("certificate", "certificate: %s" % e)
    if appliance != h["appliance_id"]:
        fail("appliance_mismatch", "certificate is for %s, head is from %s" % (appliance, h["appliance_id"]))
    # 3. The signature over the checkpoint body.
    if not signature_verifies(cert, signature_bytes(h["signature"], "head"), checkpoint_body(h)):
        fail("signature", "the signature does not verify over the checkpoint body")


def signature_verifies(cert, sig, body):
    """Whether sig is a signature of body by the appliance certificate's
    key, by the algorithm of that key ("Signatures"): an Ed25519 key signs
    the body itself (RFC 8032, 64 bytes), an ECDSA P-256 key its SHA-256
    (ASN.1 DER). check_certificate has refused any other key."""
    key = cert.public_key()
    try:
        if isinstance(key, ed25519.Ed25519PublicKey):
            if len(sig) != 64:
                return False
            key.verify(sig, body)
        elif isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1":
            key.verify(sig, body, ec.ECDSA(hashes.SHA256()))
        else:
            return False
    except (InvalidSignature, ValueError):
        return False
    return True


def not_before(cert):
    return cert.not_valid_before.replace(tzinfo=datetime.timezone.utc)


def not_after(cert):
    return cert.not_valid_after.replace(tzinfo=datetime.timezone.utc)


def extension(cert, oid):
    try:
        return cert.extensions.get_extension_for_oid(oid).value
    except x509.ExtensionNotFound:
        return None


def check_certificate(cert, ca, at):
    """Checks cert against the fleet CA at instant at; returns its appliance id."""
    if cert.issuer != ca.subject:
        fail("certificate", "the certificate's issuer is not the fleet CA")
    try:
        ca.public_key().verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
    except (InvalidSignature, TypeError, ValueError):
        fail("certificate", "the certificate is not signed by the fleet CA")
    for c, name in ((cert, "the certificate"), (ca, "the fleet CA")):
        if not (not_before(c) <= at <= not_after(c)):
            fail("certificate", "%s was not valid at %s" % (name, at.strftime("%Y-%m-%dT%H:%M:%SZ")))
    bc = extension(cert, ExtensionOID.BASIC_CONSTRAINTS)
    if bc is not None and bc.ca:
        fail("certificate", "a CA certificate, not an appliance certificate")
    ku = extension(cert, ExtensionOID.KEY_USAGE)
    if ku is None or not ku.digital_signature:
        fail("certificate", "the certificate may not sign")
    cns = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if len(cns) != 1 or not APPLIANCE.fullmatch(cns[0].value):
        fail("certificate", "the certificate's subject common name is not an appliance id")
    appliance = cns[0].value
    san = extension(cert, ExtensionOID.SUBJECT_ALTERNATIVE_NAME)
    uris = san.get_values_for_type(x509.UniformResourceIdentifier) if san is not None else []
    if "urn:tollgate:appliance:" + appliance not in uris:
        fail("certificate", "the certificate for %s lacks the URI SAN urn:tollgate:appliance:%s" % (appliance, appliance))
    key = cert.public_key()
    if not (isinstance(key, ed25519.Ed25519PublicKey)
            or (isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1")):
        fail("certificate", "the certificate for %s holds neither an Ed25519 nor an ECDSA P-256 key" % appliance)
    return appliance


def load_ca(data):
    try:
        ca = x509.load_pem_x509_certificate(data)
    except ValueError as e:
        raise UsageError("CA: %s" % e)
    bc = extension(ca, ExtensionOID.BASIC_CONSTRAINTS)
    if bc is None or not bc.ca:
        raise UsageError("CA: not a CA certificate")
    return ca


# Merkle proofs (RFC 6962 hashing; RFC 9162, 2.1.3.2 and 2.1.4.2).

def node(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def verify_inclusion(index, size, leaf_hash, path, root):
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf_hash
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node(p, r)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(size1, size2, path, root1, root2):
    if size1 > size2:
        return False
    if size1 == size2:
        return not path and root1 == root2
    if size1 == 0:
        return not path
    if not path:
        return False
    if size1 & (size1 - 1) == 0:
        path = [root1] + path
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node(c, fr)
            sr = node(c, sr)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == root1 and sr == root2


# Documents.

def heads_document(data, ca):
    doc = parse_json(data)
    if isinstance(doc, dict) and "data" in doc:
        members(doc, "heads", ("data",), ("next_page_token", "next_from"))
        if "next_page_token" in doc and "next_from" in doc:
            fail("malformed", "a page has next_page_token or next_from, not both")
        if "next_page_token" in doc and (not isinstance(doc["next_page_token"], str) or not doc["next_page_token"]):
            fail("malformed", "next_page_token is not a non-empty string")
        if "next_from" in doc and (type(doc["next_from"]) is not int or doc["next_from"] > 2**32 - 1):
            fail("malformed", "next_from is not a 32-bit unsigned integer")
        if not isinstance(doc["data"], list):
            fail("malformed", "data is not a list")
        heads = [read_head(h, "data[%d]" % i) for i, h in enumerate(doc["data"])]
    else:
        heads = [read_head(doc, "head")]
    for i, h in enumerate(heads):
        try:
            verify_head(h, ca)
        except Failure as e:
            fail(e.kind, "head %d (%s/%s/%s): %s" % (i, h["tenant_id"], h["appliance_id"], h["day"], e))
    return {"heads": len(heads)}


PROOF_MEMBERS = ("appliance_id", "day", "request_id", "sequence", "leaf_index", "tree_size",
                 "leaf_hash", "audit_path", "head", "leaf")
MAX_LEAF = 16 << 10

# The canonical leaf ("Leaf"; "The inclusion proof document", step 5).
LEAF_SCHEMA = "tollgate-audit-leaf/v1"
LEAF_STRINGS = ("schema", "request_id", "tenant_id", "appliance_id", "key_id", "time", "endpoint", "model",
                "request_sha256", "response_sha256", "salt")
LEAF_INTEGERS = ("sequence", "status", "prompt_tokens", "completion_tokens")
LEAF_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")


def _leaf_json(leaf):
    """The leaf's members, read strictly: any failure is a leaf_mismatch."""
    try:
        obj = parse_json(leaf)
    except Failure as e:
        fail("leaf_mismatch", "the leaf: %s" % e)
    if not isinstance(obj, dict):
        fail("leaf_mismatch", "the leaf is not an object")
    try:
        members(obj, "leaf", LEAF_STRINGS + LEAF_INTEGERS, ("policy_decision_id",))
    except Failure as e:
        fail("leaf_mismatch", str(e))
    for k in obj:
        if (k in LEAF_INTEGERS) != (type(obj[k]) is int) or (k not in LEAF_INTEGERS and not isinstance(obj[k], str)):
            fail("leaf_mismatch", "leaf.%s is not of its type" % k)
    return obj


def _hex(s, n):
    return re.fullmatch(r"[0-9a-f]{%d}" % (2 * n), s) is not None


def _leaf_time(s):
    if not LEAF_TIME.fullmatch(s):
        return False
    try:
        datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        return False
    return True


def _canonical(obj):
    """RFC 8785 bytes of a leaf, whose values are strings and integers:
    json.dumps escapes exactly what ECMAScript's JSON.stringify does for
    them (", \\ and U+0000 to U+001F, short escapes where JSON has them)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


def check_leaf(leaf, leaf_hash, p, h):
    """Step 5 for one leaf: it hashes to leaf_hash, is a strict canonical
    leaf, and names the proof's request, sequence, tenant and appliance."""
    got = hashlib.sha256(b"\x00" + leaf).digest()
    if got != leaf_hash:
        fail("leaf_mismatch", "the leaf hashes to %s, the proof proves leaf_hash %s" % (got.hex(), leaf_hash.hex()))
    obj = _leaf_json(leaf)
    rules = (
        ("schema", obj["schema"] == LEAF_SCHEMA),
        ("request_id", REQUEST.fullmatch(obj["request_id"])),
        ("tenant_id", TENANT.fullmatch(obj["tenant_id"])),
        ("appliance_id", APPLIANCE.fullmatch(obj["appliance_id"])),
        ("key_id", KEY.fullmatch(obj["key_id"])),
        ("policy_decision_id", "policy_decision_id" not in obj or DECISION.fullmatch(obj["policy_decision_id"])),
        ("sequence", 1 <= obj["sequence"] <= MAX_INT),
        ("time", _leaf_time(obj["time"])),
        ("endpoint", obj["endpoint"] != ""),
        ("status", 100 <= obj["status"] <= 599),
        ("prompt_tokens", obj["prompt_tokens"] <= MAX_INT),
        ("completion_tokens", obj["completion_tokens"] <= MAX_INT),
        ("request_sha256", _hex(obj["request_sha256"], 32)),
        ("response_sha256", _hex(obj["response_sha256"], 32)),
        ("salt", _hex(obj["salt"], 16)),
    )
    for name, ok in rules:
        if not ok:
            fail("leaf_mismatch", "leaf.%s is not of its form" % name)
    if _canonical(obj) != leaf:
        fail("leaf_mismatch", "the leaf's bytes are not its RFC 8785 form")
    if obj["request_id"] != p["request_id"]:
        fail("leaf_mismatch", "request_id is %s, the leaf's is %s" % (p["request_id"], obj["request_id"]))
    if obj["sequence"] != p["sequence"]:
        fail("leaf_mismatch", "sequence is %d, the leaf's is %d" % (p["sequence"], obj["sequence"]))
    if obj["tenant_id"] != h["tenant_id"]:
        fail("leaf_mismatch", "the head's tenant_id is %s, the leaf's is %s" % (h["tenant_id"], obj["tenant_id"]))
    if obj["appliance_id"] != p["appliance_id"]:
        fail("leaf_mismatch", "appliance_id is %s, the leaf's is %s" % (p["appliance_id"], obj["appliance_id"]))


def bind_leaf(doc_leaf, given, leaf_hash, p, h):
    """Step 5: the document's leaf and the one given, each when there is
    one; with neither, nothing binds request_id and sequence."""
    if not doc_leaf and given is None:
        fail("leaf_mismatch", "the proof carries no leaf, so nothing binds request_id %s and sequence %d to leaf_hash" % (
            p["request_id"], p["sequence"]))
    for what, leaf in (("the proof's leaf", doc_leaf), ("the leaf given", given)):
        if leaf:
            try:
                check_leaf(leaf, leaf_hash, p, h)
            except Failure as e:
                fail(e.kind, "%s: %s" % (what, e))


def proof_document(data, ca, given_leaf=None):
    doc = members(parse_json(data), "proof", PROOF_MEMBERS)
    leaf = string(doc, "leaf", "proof")
    if len(leaf.encode("utf-8", "surrogatepass")) > MAX_LEAF:
        fail("malformed", "proof.leaf is longer than %d bytes" % MAX_LEAF)
    leaf = leaf.encode("utf-8", "surrogatepass")
    p = {k: string(doc, k, "proof") for k in ("appliance_id", "day", "request_id")}
    for k in ("sequence", "leaf_index", "tree_size"):
        p[k] = integer(doc, k, "proof")
    leaf_hash = hash32(doc["leaf_hash"], "proof.leaf_hash")
    path = hashes_of(doc, "audit_path", "proof", bounded=False)
    h = read_head(doc["head"], "proof.head")
    if not APPLIANCE.fullmatch(p["appliance_id"]) or parse_day(p["day"]) is None or not REQUEST.fullmatch(p["request_id"]):
        fail("malformed", "appliance_id, day or request_id is malformed")
    verify_head(h, ca)
    if p["appliance_id"] != h["appliance_id"] or p["day"] != h["day"]:
        fail("proof_mismatch", "a proof of %s/%s under a head of %s/%s" % (p["appliance_id"], p["day"], h["appliance_id"], h["day"]))
    if p["tree_size"] != h["event_count"]:
        fail("proof_mismatch", "tree_size %d is not the head's event_count %d" % (p["tree_size"], h["event_count"]))
    if p["leaf_index"] >= p["tree_size"]:
        fail("proof_mismatch", "leaf_index %d outside a tree of %d leaves" % (p["leaf_index"], p["tree_size"]))
    if p["sequence"] <= p["leaf_index"] or p["sequence"] > h["last_sequence"]:
        fail("proof_mismatch", "sequence %d impossible for leaf %d under last_sequence %d" % (p["sequence"], p["leaf_index"], h["last_sequence"]))
    if p["leaf_index"] == p["tree_size"] - 1 and p["sequence"] != h["last_sequence"]:
        fail("proof_mismatch", "the last leaf has sequence %d, not the head's last_sequence %d" % (p["sequence"], h["last_sequence"]))
    if not verify_inclusion(p["leaf_index"], p["tree_size"], leaf_hash, path, bytes.fromhex(h["merkle_root"])):
        fail("inclusion", "the audit path does not lead from leaf_hash to the head's root")
    bind_leaf(leaf, given_leaf, leaf_hash, p, h)
    return {"tenant_id": h["tenant_id"], "appliance_id": p["appliance_id"], "day": p["day"],
            "request_id": p["request_id"], "leaf_index": p["leaf_index"], "tree_size": p["tree_size"]}


CONSISTENCY_MEMBERS = ("appliance_id", "day", "from_size", "to_size", "consistency_proof", "from_head", "to_head")


def consistency_document(data, ca):
    doc = members(parse_json(data), "consistency", CONSISTENCY_MEMBERS)
    appliance, day = string(doc, "appliance_id", "consistency"), string(doc, "day", "consistency")
    size1, size2 = integer(doc, "from_size", "consistency"), integer(doc, "to_size", "consistency")
    path = hashes_of(doc, "consistency_proof", "consistency")
    h1 = read_head(doc["from_head"], "consistency.from_head")
    h2 = read_head(doc["to_head"], "consistency.to_head")
    if not APPLIANCE.fullmatch(appliance) or parse_day(day) is None:
        fail("malformed", "appliance_id or day is malformed")
    for name, h in (("from_head", h1), ("to_head", h2)):
        try:
            verify_head(h, ca)
        except Failure as e:
            fail(e.kind, "%s: %s" % (name, e))
    tree1 = (h1["tenant_id"], h1["appliance_id"], h1["day"])
    if tree1 != (h2["tenant_id"], h2["appliance_id"], h2["day"]):
        fail("proof_mismatch", "heads of different trees")
    if (appliance, day) != (h1["appliance_id"], h1["day"]):
        fail("proof_mismatch", "a proof of %s/%s with heads of %s/%s" % (appliance, day, h1["appliance_id"], h1["day"]))
    if (size1, size2) != (h1["event_count"], h2["event_count"]):
        fail("proof_mismatch", "sizes %d and %d, heads of %d and %d events" % (size1, size2, h1["event_count"], h2["event_count"]))
    if size1 > size2:
        fail("proof_mismatch", "from_head is larger than to_head")
    if (size1 == size2 and h1["last_sequence"] != h2["last_sequence"]) or (size1 < size2 and h1["last_sequence"] >= h2["last_sequence"]):
        fail("proof_mismatch", "last_sequence %d at %d events, then %d at %d" % (h1["last_sequence"], size1, h2["last_sequence"], size2))
    if not verify_consistency(size1, size2, path, bytes.fromhex(h1["merkle_root"]), bytes.fromhex(h2["merkle_root"])):
        fail("inclusion", "the consistency proof does not lead from from_head's root at %d events to to_head's at %d" % (size1, size2))
    return {"tenant_id": h1["tenant_id"], "appliance_id": appliance, "day": day, "from_size": size1, "to_size": size2}


DOCUMENTS = {"head": heads_document, "proof": proof_document, "consistency": consistency_document}


class UsageError(Exception):
    pass


def verify(kind, data, ca_pem, leaf=None):
    """Verifies document data of kind against the CA PEM (a proof, with the
    event's canonical leaf when given): the verdict."""
    if leaf is not None and kind != "proof":
        raise UsageError("--leaf goes with proof only")
    with warnings.catch_warnings():
        # The parser warns of what it reads leniently in a tampered
        # certificate; the checks below refuse such a certificate anyway.
        warnings.simplefilter("ignore")
        ca = load_ca(ca_pem)
        try:
            out = DOCUMENTS[kind](data, ca, leaf) if leaf is not None else DOCUMENTS[kind](data, ca)
        except Failure as e:
            return {"ok": False, "document": kind, "error": e.kind, "message": str(e)}
    return dict({"ok": True, "document": kind}, **out)


def main(argv):
    ap = argparse.ArgumentParser(description="Verify a Tollgate audit document offline against the fleet CA.")
    ap.add_argument("kind", choices=sorted(DOCUMENTS))
    ap.add_argument("file", help="the document, or - for standard input")
    ap.add_argument("--ca", required=True, help="PEM of the fleet CA certificate")
    ap.add_argument("--leaf", help="proof only: the event's canonical leaf from the appliance")
    args = ap.parse_args(argv)
    try:
        if args.file == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(args.file, "rb") as f:
                data = f.read()
        with open(args.ca, "rb") as f:
            ca_pem = f.read()
        leaf = None
        if args.leaf is not None:
            with open(args.leaf, "rb") as f:
                leaf = f.read()
            if leaf.endswith(b"\n"):
                leaf = leaf[:-1]
        v = verify(args.kind, data, ca_pem, leaf)
    except (OSError, UsageError) as e:
        print(json.dumps({"ok": False, "document": args.kind, "error": "input", "message": str(e)}))
        return 2
    print(json.dumps(v))
    return 0 if v["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
