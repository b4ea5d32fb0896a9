"""The Python bundle verifier against a live `tollgate dev`.

Requests go through the gateway (plain and streamed); `tollgate audit
export` then writes the tenant's day from the running appliance, and
this verifier and `tollgate verify bundle` must agree on every document:
the exported bundle passes with the same summary, and tampered copies
(members changed, bodies altered, events dropped or reordered, an audit
path, the head's signature or certificate changed, bytes flipped) fail
with the same kind.

    TOLLGATE_BIN=bin/tollgate /usr/bin/python3 -m unittest -v test_live_bundle
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

import tollgate_bundle as tb
from test_live import BIN, HERE, KEY, replace, tampers, today


class LiveBundle(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tollgate-pybundle-")
        cls.proc = subprocess.Popen(
            [BIN, "dev", "--data", cls.dir, "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0",
             "--portal-addr", "127.0.0.1:0", "--central-addr", "127.0.0.1:0", "--head-interval", "1s",
             "--seed", os.path.join(HERE, "testdata", "seed.yaml"), "--log-level", "warn"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in cls.proc.stdout], daemon=True).start()
        out, deadline = "", time.time() + 60
        while not re.search(r"Base URL:\s+(http://\S+)/v1", out):
            try:
                out += lines.get(timeout=max(0.1, deadline - time.time()))
            except queue.Empty:
                pass
            if time.time() > deadline or cls.proc.poll() is not None:
                cls.tearDownClass()
                raise RuntimeError("tollgate dev did not start: " + out)
        cls.gateway = re.search(r"Base URL:\s+(http://\S+)/v1", out).group(1)
        cls.ca_file = os.path.join(cls.dir, "fleet-ca.pem")
        with open(cls.ca_file, "rb") as f:
            cls.ca = f.read()
        cls.ids = [cls.chat("first", False), cls.chat("streamed", True), cls.chat("third <&> \u00e9", False)]
        cls.bundle = cls.export_covered()

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        try:
            cls.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            cls.proc.kill()
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def chat(cls, text, stream):
        body = {"model": "builtin/echo", "messages": [{"role": "user", "content": text}]}
        if stream:
            body["stream"] = True
        req = urllib.request.Request(cls.gateway + "/v1/chat/completions", method="POST", data=json.dumps(body).encode(),
                                     headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()
            return resp.headers["x-request-id"]

    @classmethod
    def export(cls):
        out = os.path.join(cls.dir, "bundle.json")
        r = subprocess.run([BIN, "audit", "export", "--data", cls.dir, "--tenant", "acme", "--day", today(), "--out", out],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("export: %s %s" % (r.stdout, r.stderr))
        if "from the running appliance" not in r.stdout:
            raise RuntimeError("export did not go through the running appliance: " + r.stdout)
        with open(out, "rb") as f:
            return f.read()

    @classmethod
    def export_covered(cls):
        """A bundle whose head covers the three requests (a head is signed
        every second)."""
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                data = cls.export()
            except RuntimeError as e:
                if "no signed head" not in str(e):
                    raise
            else:
                doc = json.loads(data)
                if len(doc["events"]) >= len(cls.ids):
                    return data
            time.sleep(0.2)
        raise RuntimeError("no head covering the requests in a minute")

    def both(self, doc):
        """The verdicts of this verifier and of `tollgate verify bundle` on doc."""
        ours = tb.verify(doc, self.ca)
        r = subprocess.run([BIN, "verify", "bundle", "-", "--ca", self.ca_file], input=doc, capture_output=True)
        theirs = json.loads(r.stdout)
        self.assertEqual(theirs["ok"], r.returncode == 0)
        return ours, theirs

    def assertAgree(self, doc, ok, what):
        ours, theirs = self.both(doc)
        self.assertEqual((ours["ok"], theirs["ok"]), (ok, ok), "%s: this verifier %s, tollgate verify %s" % (what, ours, theirs))
        if not ok:
            self.assertEqual(ours["error"], theirs["error"], "%s: the verifiers disagree on the fault: %s / %s" % (
                what, ours["message"], theirs["message"]))
        return ours, theirs

    def changed(self, change):
        doc = json.loads(self.bundle)
        change(doc)
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()

    def test_exported_bundle_verifies(self):
        ours, theirs = self.assertAgree(self.bundle, True, "the exported bundle")
        self.assertEqual(ours["bundle"], theirs["bundle"])
        self.assertEqual(ours["bundle"]["events"] + ours["bundle"]["uncovered"], len(self.ids))
        self.assertEqual(ours["bundle"]["models"], {"builtin/echo": len(self.ids)})
        self.assertEqual(ours["bundle"]["receipts"], len(self.ids))
        doc = json.loads(self.bundle)
        got = [json.loads(e["leaf"])["request_id"] for e in doc["events"] + doc["uncovered"]]
        self.assertEqual(got, self.ids)
        # The bodies are the bytes sent: the stream's SSE ends with [DONE].
        self.assertTrue(base64.b64decode(doc["events"][1]["response_body"]).endswith(b"data: [DONE]\n\n"))

    def test_tampered_parts(self):
        """The changes an auditor must catch, each with its kind."""
        def body(doc):
            doc["events"][0]["request_body"] = base64.b64encode(b'{"model":"builtin/echo","messages":[]}').decode()

        def drop(doc):
            del doc["events"][1]

        def reorder(doc):
            doc["events"][0], doc["events"][1] = doc["events"][1], doc["events"][0]

        def path(doc):
            p = doc["events"][0]["audit_path"]
            p[0] = ("0" if p[0][0] != "0" else "1") + p[0][1:]

        def signature(doc):
            s = doc["head"]["signature"]
            doc["head"]["signature"] = s[:10] + ("A" if s[10] != "A" else "B") + s[11:]

        def certificate(doc):
            doc["head"]["certificate"] = self.ca.decode()

        def leaf(doc):
            doc["events"][2]["leaf"] = doc["events"][2]["leaf"].replace('"status":200', '"status":201')

        def receipt(doc):
            doc["events"][0]["receipt"] = doc["events"][1]["receipt"]

        for name, change, kind in (("altered body", body, "body_mismatch"), ("dropped event", drop, "incomplete"),
                                   ("reordered events", reorder, "incomplete"), ("altered audit path", path, "inclusion"),
                                   ("altered head signature", signature, "signature"),
                                   ("swapped certificate", certificate, "certificate"),
                                   ("altered leaf member", leaf, "inclusion"), ("swapped receipt", receipt, "leaf_mismatch")):
            ours, _ = self.assertAgree(self.changed(change), False, name)
            self.assertEqual(ours["error"], kind, name)

    def test_tampered_members(self):
        """Every member of the bundle changed in turn: both verifiers refuse it."""
        obj = json.loads(self.bundle)
        for p, new in tampers(obj):
            if p[-1] == "exported_at":
                continue  # unbound
            self.assertAgree(json.dumps(replace(obj, p, new), separators=(",", ":"), ensure_ascii=False).encode(), False,
                             "%s = %r" % ("/".join(map(str, p)), new))

    def test_flipped_bytes(self):
        """A byte flipped, some 80 spread over the bundle: both verifiers
        refuse it, or both pass it (white space, the unbound exported_at)."""
        doc = self.bundle
        start = doc.index(b'"exported_at"')
        unbound = range(start, doc.index(b",", start))
        for i in range(0, len(doc), max(7, len(doc) // 80)):
            flipped = bytearray(doc)
            flipped[i] ^= 0x01
            ours, theirs = self.both(bytes(flipped))
            if i in unbound and ours["ok"]:
                continue
            self.assertEqual((ours["ok"], theirs["ok"]), (False, False), "byte %d flipped: %s / %s" % (i, ours, theirs))
            self.assertEqual(ours["error"], theirs["error"], "byte %d flipped: %s / %s" % (i, ours["message"], theirs["message"]))


if __name__ == "__main__":
    unittest.main()
