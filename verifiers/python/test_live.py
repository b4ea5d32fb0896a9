"""The Python verifier against a live `tollgate dev`.

Requests go through the gateway; once their heads reach the in-process
central plane, the heads list, a tree's history, inclusion proofs and a
consistency proof are read over REST and checked by this verifier and by
`tollgate verify`, which must agree on every document: the served ones
pass, tampered copies (members changed, bytes flipped, a forked head the
appliance's key signed) fail.

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
from cryptography.hazmat.primitives.asymmetric import ec

import tollgate_verify as tv

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("TOLLGATE_BIN", os.path.join(HERE, "..", "..", "bin", "tollgate"))
KEY = "tgk_test_python_acme"
TOKEN = "tga_test_python_acme"


def today():
    return time.strftime("%Y-%m-%d", time.gmtime())


class Live(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tollgate-pyverify-")
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

    def both(self, kind, doc):
        """The verdicts of this verifier and of `tollgate verify` on doc."""
        ours = tv.verify(kind, doc, self.ca)
        r = subprocess.run([BIN, "verify", kind, "-", "--ca", self.ca_file], input=doc, capture_output=True)
        theirs = json.loads(r.stdout)
        self.assertEqual(theirs["ok"], r.returncode == 0)
        return ours, theirs

    def assertAgree(self, kind, doc, ok, what):
        ours, theirs = self.both(kind, doc)
        self.assertEqual((ours["ok"], theirs["ok"]), (ok, ok), "%s: this verifier %s, tollgate verify %s" % (what, ours, theirs))
        return ours, theirs

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
        verifiers refuse it (a proof's request_id and sequence aside, which
        the leaf hash does not bind)."""
        for name, (kind, doc) in self.docs.items():
            unbound = set()
            if kind == "proof":
                for m in re.finditer(rb'"request_id":"[^"]*"|"sequence":[0-9]+', doc):
                    unbound.update(range(m.start(), m.end()))
            for i in range(3, len(doc), max(7, len(doc) // 60)):
                if i in unbound:
                    continue
                flipped = bytearray(doc)
                flipped[i] ^= 0x01
                self.assertAgree(kind, bytes(flipped), False, "%s with byte %d flipped" % (name, i))

    def test_forked_pair(self):
        """The appliance's key signs another view of its tree of 3 events:
        the pair is forked, and both verifiers refuse it."""
        with open(os.path.join(self.dir, "appliance-key.pem"), "rb") as f:
            key = serialization.load_pem_private_key(f.read(), password=None)
        doc = json.loads(self.docs["consistency"][1])
        forked = dict(doc["from_head"], merkle_root="ab" * 32)
        forked["signature"] = base64.b64encode(key.sign(tv.checkpoint_body(forked), ec.ECDSA(hashes.SHA256()))).decode()
        self.assertAgree("head", json.dumps(forked).encode(), True, "the forked head alone")
        doc["from_head"] = forked
        ours, theirs = self.assertAgree("consistency", json.dumps(doc, separators=(",", ":")).encode(), False, "a forked pair")
        self.assertEqual((ours["error"], theirs["error"]), ("inclusion", "inclusion"))


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
            if k in ("request_id", "sequence", "next_from", "next_page_token"):
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


if __name__ == "__main__":
    unittest.main()
