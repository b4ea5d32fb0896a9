"""The Python verifier against a live `tollgate dev`.

Requests go through the gateway; once their heads reach the in-process
central plane, the heads list, a tree's history, inclusion proofs and a
consistency proof are read over REST and checked by this verifier and by
`tollgate verify`, which must agree on every document: the served ones
pass, tampered copies (members changed, bytes flipped, a proof's leaf
changed or dropped, a forked head the appliance's key signed) fail. It
runs twice: with the Ed25519 appliance key `tollgate dev` makes, and
with an ECDSA P-256 one issued beforehand, as appliances issued before
Ed25519 keys hold. The worked examples of docs/audit-format.md, one of
each kind, are checked too.

    TOLLGATE_BIN=bin/tollgate /usr/bin/python3 -m unittest -v test_live
"""

import base64
import json
import os
import queue
import re
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.request

from cryptography.hazmat.primitives import hashes, serialization
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

import tollgate_verify as tv

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("TOLLGATE_BIN", os.path.join(HERE, "..", "..", "bin", "tollgate"))
KEY = "tgk_test_python_acme"
TOKEN = "tga_test_python_acme"


def today():
    return time.strftime("%Y-%m-%d", time.gmtime())


def prepare_appliance(data, key_kind):
    """Gives `tollgate dev` in data an appliance certificate with a key of
    key_kind issued by `tollgate fleet`, before its first start; None
    leaves it to make its own (Ed25519)."""
    if key_kind is None:
        return
    app = "app_devpy" + key_kind.replace("-", "")[:8]
    with open(os.path.join(data, "appliance-id"), "w") as f:
        f.write(app + "\n")
    for args in (["fleet", "init-ca", "--dir", data],
                 ["fleet", "issue", "--appliance", app, "--key", key_kind, "--ca-dir", data, "--out", data]):
        subprocess.run([BIN] + args, check=True, stdout=subprocess.DEVNULL)


def key_kind_of(certificate_pem):
    """"ed25519" or "ecdsa-p256", the kind of an appliance certificate's key."""
    key = x509.load_pem_x509_certificate(certificate_pem.encode()).public_key()
    if isinstance(key, ed25519.Ed25519PublicKey):
        return "ed25519"
    if isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1":
        return "ecdsa-p256"
    return type(key).__name__


def sign(key, body):
    """Signs body with an appliance key as the appliance does
    (docs/audit-format.md, "Signatures")."""
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.sign(body)
    return key.sign(body, ec.ECDSA(hashes.SHA256()))


class Live(unittest.TestCase):
    # The appliance key: None for the one `tollgate dev` makes (Ed25519).
    KEY_KIND = None

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tollgate-pyverify-")
        prepare_appliance(cls.dir, cls.KEY_KIND)
        cls.proc = subprocess.Popen(
            [BIN, "dev", "--data", cls.dir, "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0",
             "--portal-addr", "127.0.0.1:0", "--central-addr", "127.0.0.1:0", "--head-interval", "1s",
             "--seed", os.path.join(HERE, "testdata", "seed.yaml"), "--log-level", "warn"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in cls.proc.stdout], daemon=True).start()
        out, deadline = "", time.time() + 60
        while not (re.search(r"Base URL:\s+(http://\S+)/v1", out) and re.search(r"Audit API: (http://[^/\s]+)/v1", out)):
            try:
                out += lines.get(timeout=max(0.1, deadline - time.time()))
            except queue.Empty:
                pass
            if time.time() > deadline or cls.proc.poll() is not None:
                cls.tearDownClass()
                raise RuntimeError("tollgate dev did not start: " + out)
        cls.gateway = re.search(r"Base URL:\s+(http://\S+)/v1", out).group(1)
        cls.central = re.search(r"Audit API: (http://[^/\s]+)/v1", out).group(1)
        cls.ca_file = os.path.join(cls.dir, "fleet-ca.pem")
        with open(cls.ca_file, "rb") as f:
            cls.ca = f.read()

        cls.requests = [cls.chat(t) for t in ("one", "two", "three")]
        first = cls.head_with(3)
        cls.requests += [cls.chat(t) for t in ("four", "five")]
        latest = cls.head_with(5)
        cls.app, day = latest["appliance_id"], today()
        tree = "appliance_id=%s&day=%s" % (cls.app, day)
        cls.docs = {
            "heads": ("head", cls.get("/v1/tenants/acme/audit/heads?day=" + day)),
            "history": ("head", cls.get("/v1/tenants/acme/audit/history?" + tree)),
            "consistency": ("consistency", cls.get("/v1/tenants/acme/audit/consistency?%s&from_size=%d&to_size=%d" % (
                tree, first["event_count"], latest["event_count"]))),
        }
        for i, rid in enumerate(cls.requests):
            cls.docs["proof %d" % i] = ("proof", cls.get("/v1/tenants/acme/audit/proof?%s&request_id=%s" % (tree, rid)))

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        try:
            cls.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            cls.proc.kill()
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def chat(cls, text):
        req = urllib.request.Request(cls.gateway + "/v1/chat/completions", method="POST",
                                     data=json.dumps({"model": "builtin/echo", "messages": [{"role": "user", "content": text}]}).encode(),
                                     headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()
            return resp.headers["x-request-id"]

    @classmethod
    def get(cls, path):
        req = urllib.request.Request(cls.central + path, headers={"Authorization": "Bearer " + TOKEN})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.read()

    @classmethod
    def head_with(cls, n):
        """The head of acme's tree of exactly n events, once the plane holds it."""
        deadline = time.time() + 60
        while time.time() < deadline:
            doc = json.loads(cls.get("/v1/tenants/acme/audit/heads?day=" + today()))
            for h in doc["data"]:
                if h["event_count"] >= n:
                    history = json.loads(cls.get("/v1/tenants/acme/audit/history?appliance_id=%s&day=%s" % (h["appliance_id"], today())))
                    for old in history["data"]:
                        if old["event_count"] == n:
                            return old
            time.sleep(0.2)
        raise RuntimeError("no head of %d events reached the central plane in a minute" % n)

    def both(self, kind, doc, leaf=None):
        """The verdicts of this verifier and of `tollgate verify` on doc
        (a proof with the event's canonical leaf, when given)."""
        ours = tv.verify(kind, doc, self.ca, leaf)
        args = [BIN, "verify", kind, "-", "--ca", self.ca_file]
        if leaf is not None:
            leaf_file = os.path.join(self.dir, "leaf.json")
            with open(leaf_file, "wb") as f:
                f.write(leaf)
            args += ["--leaf", leaf_file]
        r = subprocess.run(args, input=doc, capture_output=True)
        theirs = json.loads(r.stdout)
        self.assertEqual(theirs["ok"], r.returncode == 0)
        return ours, theirs

    def assertAgree(self, kind, doc, ok, what, leaf=None):
        ours, theirs = self.both(kind, doc, leaf)
        self.assertEqual((ours["ok"], theirs["ok"]), (ok, ok), "%s: this verifier %s, tollgate verify %s" % (what, ours, theirs))
        if not ok:
            self.assertEqual(ours["error"], theirs["error"], "%s: the verifiers fail it differently: %s, %s" % (what, ours, theirs))
        return ours, theirs

    def test_key_kind(self):
        """The heads are signed with the appliance key of the kind asked for."""
        doc = json.loads(self.docs["heads"][1])
        self.assertEqual({key_kind_of(h["certificate"]) for h in doc["data"]}, {self.KEY_KIND or "ed25519"})

    def test_served_documents_verify(self):
        for name, (kind, doc) in self.docs.items():
            ours, _ = self.assertAgree(kind, doc, True, name)
            if name == "history":
                self.assertGreaterEqual(ours["heads"], 2)
            if name == "consistency":
                self.assertEqual((ours["from_size"], ours["to_size"]), (3, 5))

    def test_tampered_members(self):
        """A member of each document changed: both verifiers refuse it."""
        for name, (kind, doc) in self.docs.items():
            obj = json.loads(doc)
            for path, new in tampers(obj):
                changed = json.dumps(replace(obj, path, new), separators=(",", ":")).encode()
                self.assertAgree(kind, changed, False, "%s with %s = %r" % (name, "/".join(map(str, path)), new))

    def test_flipped_bytes(self):
        """A byte of each document flipped, some 60 spread over it: both
        verifiers refuse it (a proof's request_id and sequence too, which
        its leaf binds)."""
        for name, (kind, doc) in self.docs.items():
            for i in range(3, len(doc), max(7, len(doc) // 60)):
                flipped = bytearray(doc)
                flipped[i] ^= 0x01
                self.assertAgree(kind, bytes(flipped), False, "%s with byte %d flipped" % (name, i))

    def test_proof_leaf(self):
        """A proof binds its request through its leaf: with request_id or
        sequence changed, the leaf changed or dropped, both verifiers
        refuse it (leaf_mismatch); a proof without its leaf verifies with
        the event's leaf from the appliance, and not with another's."""
        kind, doc = self.docs["proof 1"]
        obj = json.loads(doc)
        other = json.loads(self.docs["proof 2"][1])["leaf"].encode()
        own = obj["leaf"].encode()
        self.assertTrue(own.startswith(b'{"appliance_id":"%s",' % self.app.encode()), own)
        dropped = dict(obj, leaf="")
        for what, changed, leaf, ok in (
                ("request_id changed", dict(obj, request_id=obj["request_id"] + "0"), None, False),
                ("sequence changed", dict(obj, sequence=obj["sequence"] + 1), None, False),
                ("leaf of another event", dict(obj, leaf=other.decode()), None, False),
                ("leaf salt changed", dict(obj, leaf=re.sub(r'"salt":"(.)', lambda m: '"salt":"' + ("0" if m.group(1) != "0" else "1"), obj["leaf"])), None, False),
                ("leaf re-serialised", dict(obj, leaf=json.dumps(json.loads(obj["leaf"]))), None, False),
                ("leaf dropped", dropped, None, False),
                ("leaf dropped and request_id changed", dict(dropped, request_id=obj["request_id"] + "0"), None, False),
                ("leaf dropped, the event's given", dropped, own, True),
                ("leaf dropped, another's given", dropped, other, False),
                ("the event's leaf given too", obj, own, True),
                ("another's leaf given too", obj, other, False)):
            ours, theirs = self.assertAgree(kind, json.dumps(changed, separators=(",", ":")).encode(), ok, what, leaf)
            if not ok:
                self.assertEqual(ours["error"], "leaf_mismatch", what)

    def test_forked_pair(self):
        """The appliance's key signs another view of its tree of 3 events:
        the pair is forked, and both verifiers refuse it."""
        with open(os.path.join(self.dir, "appliance-key.pem"), "rb") as f:
            key = serialization.load_pem_private_key(f.read(), password=None)
        doc = json.loads(self.docs["consistency"][1])
        forked = dict(doc["from_head"], merkle_root="ab" * 32)
        forked["signature"] = base64.b64encode(sign(key, tv.checkpoint_body(forked))).decode()
        self.assertAgree("head", json.dumps(forked).encode(), True, "the forked head alone")
        doc["from_head"] = forked
        ours, theirs = self.assertAgree("consistency", json.dumps(doc, separators=(",", ":")).encode(), False, "a forked pair")
        self.assertEqual((ours["error"], theirs["error"]), ("inclusion", "inclusion"))


class LiveECDSA(Live):
    """The same, with an appliance issued an ECDSA P-256 key."""
    KEY_KIND = "ecdsa-p256"


class WorkedExamples(unittest.TestCase):
    """The worked examples of docs/audit-format.md, a head signed with an
    ECDSA P-256 key and the same head signed with an Ed25519 key (the Go
    tests' goldens): both verify, and neither signature verifies under the
    other's certificate."""

    def setUp(self):
        testdata = os.path.join(HERE, "..", "..", "audit", "head", "testdata")
        self.examples = {}
        for kind, d in (("ecdsa-p256", testdata), ("ed25519", os.path.join(testdata, "ed25519"))):
            with open(os.path.join(d, "golden-head.json"), "rb") as f, open(os.path.join(d, "fleet-ca.pem"), "rb") as g:
                self.examples[kind] = (json.loads(f.read()), g.read())

    def test_examples(self):
        for kind, (h, ca) in self.examples.items():
            self.assertEqual(key_kind_of(h["certificate"]), kind)
            self.assertTrue(tv.verify("head", json.dumps(h).encode(), ca)["ok"], kind)
            other = self.examples["ed25519" if kind == "ecdsa-p256" else "ecdsa-p256"][0]
            swapped = dict(h, signature=other["signature"])
            got = tv.verify("head", json.dumps(swapped).encode(), ca)
            self.assertEqual((got["ok"], got.get("error")), (False, "signature"), "%s certificate, other signature" % kind)
            tampered = dict(h, last_sequence=h["last_sequence"] + 1)
            got = tv.verify("head", json.dumps(tampered).encode(), ca)
            self.assertEqual((got["ok"], got.get("error")), (False, "signature"), "%s, tampered body" % kind)


def replace(obj, path, new):
    """A copy of obj with the member at path set to new."""
    if not path:
        return new
    out = list(obj) if isinstance(obj, list) else dict(obj)
    out[path[0]] = replace(obj[path[0]], path[1:], new)
    return out


def tampers(obj, path=()):
    """(path, new value) pairs, each changing one member of obj so that the
    document says something else: numbers moved by one, hex and base64
    characters changed, identifiers and days altered, members dropped."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in ("next_from", "next_page_token"):
                continue  # not bound by a signature or a hash (docs/audit-format.md)
            yield from tampers(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:2]):
            yield from tampers(v, path + (i,))
    elif type(obj) is int:
        yield path, obj + 1
        if obj > 0:
            yield path, obj - 1
    elif isinstance(obj, str):
        name = path[-1]
        if name in ("signature",):
            yield path, obj[:10] + ("A" if obj[10] != "A" else "B") + obj[11:]
        elif name == "certificate":
            i = obj.index("\n") + 40
            yield path, obj[:i] + ("A" if obj[i] != "A" else "B") + obj[i + 1:]
        elif name == "day":
            yield path, "2020-01-01"
        elif name == "signed_at":
            yield path, obj[:17] + ("00" if obj[17:19] != "00" else "01") + obj[19:]
        elif re.fullmatch(r"[0-9a-f]{64}", obj):
            yield path, ("0" if obj[0] != "0" else "1") + obj[1:]
        elif name in ("tenant_id", "appliance_id"):
            yield path, obj + "x"
        elif name == "request_id":
            yield path, obj + "0"
        elif name == "leaf":
            yield path, obj.replace('"status":', '"status":1', 1)
            yield path, ""


if __name__ == "__main__":
    unittest.main()
