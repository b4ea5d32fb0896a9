"""The Python receipt verifier against a live `tollgate dev`.

A plain reply's receipt (its x-tollgate-receipt header) and a stream's,
fetched by GET /v1/receipts/{id}, are checked by this verifier and by
`tollgate verify receipt`, which must agree on every document: the served
ones pass, tampered copies (members changed, bytes flipped) fail; and an
inclusion proof of the plain request, once a head covers it, is of the
leaf its receipt promised, and of no other receipt's. It runs twice: with
the Ed25519 appliance key `tollgate dev` makes, and with an ECDSA P-256
one issued beforehand.

    TOLLGATE_BIN=bin/tollgate /usr/bin/python3 -m unittest -v test_live_receipts
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
import urllib.error
import urllib.request

import tollgate_receipt as tr
from test_live import BIN, HERE, KEY, TOKEN, key_kind_of, prepare_appliance, replace, tampers, today


class LiveReceipts(unittest.TestCase):
    # The appliance key: None for the one `tollgate dev` makes (Ed25519).
    KEY_KIND = None

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tollgate-pyreceipt-")
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

        plain_id, header = cls.chat("plain", stream=False)
        stream_id, stream_header = cls.chat("streamed", stream=True)
        if stream_header is not None:
            raise RuntimeError("a stream's headers carry a receipt")
        cls.plain_id, cls.stream_id = plain_id, stream_id
        cls.header = header.encode()
        cls.docs = {
            "plain reply's receipt": base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)),
            "plain reply's header value": cls.header,
            "stream's receipt": cls.gateway_get("/v1/receipts/" + stream_id),
        }
        cls.proof = cls.proof_of(plain_id)

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
            data = resp.read()
            if stream and not data.endswith(b"data: [DONE]\n\n"):
                raise RuntimeError("the stream did not end with [DONE]")
            return resp.headers["x-request-id"], resp.headers["x-tollgate-receipt"]

    @classmethod
    def gateway_get(cls, path):
        req = urllib.request.Request(cls.gateway + path, headers={"Authorization": "Bearer " + KEY})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.read()

    @classmethod
    def proof_of(cls, request_id):
        """The inclusion proof of request_id, once a head covering it is at
        the central plane."""
        deadline = time.time() + 60
        while time.time() < deadline:
            doc = json.loads(cls.docs["plain reply's receipt"])
            path = "/v1/tenants/acme/audit/proof?appliance_id=%s&day=%s&request_id=%s" % (doc["appliance_id"], doc["day"], request_id)
            req = urllib.request.Request(cls.central + path, headers={"Authorization": "Bearer " + TOKEN})
            try:
                with urllib.request.urlopen(req, timeout=30) as resp:
                    return resp.read()
            except urllib.error.HTTPError as e:
                if e.code not in (404, 412):
                    raise
            time.sleep(0.2)
        raise RuntimeError("no proof of %s at the central plane in a minute" % request_id)

    def both(self, doc, proof=None):
        """The verdicts of this verifier and of `tollgate verify` on doc."""
        ours = tr.verify(doc, self.ca, proof)
        if proof is None:
            r = subprocess.run([BIN, "verify", "receipt", "-", "--ca", self.ca_file], input=doc, capture_output=True)
        else:
            with tempfile.NamedTemporaryFile(dir=self.dir, suffix=".receipt") as f:
                f.write(doc)
                f.flush()
                r = subprocess.run([BIN, "verify", "proof", "-", "--ca", self.ca_file, "--receipt", f.name],
                                   input=proof, capture_output=True)
        theirs = json.loads(r.stdout)
        self.assertEqual(theirs["ok"], r.returncode == 0)
        return ours, theirs

    def assertAgree(self, doc, ok, what, proof=None):
        ours, theirs = self.both(doc, proof)
        self.assertEqual((ours["ok"], theirs["ok"]), (ok, ok), "%s: this verifier %s, tollgate verify %s" % (what, ours, theirs))
        if not ok:
            self.assertEqual(ours["error"], theirs["error"], "%s: the verifiers disagree on the fault" % what)
        return ours, theirs

    def test_key_kind(self):
        """The receipts are signed with the appliance key of the kind asked for."""
        for what, doc in self.docs.items():
            if what != "plain reply's header value":
                self.assertEqual(key_kind_of(json.loads(doc)["certificate"]), self.KEY_KIND or "ed25519", what)

    def test_served_receipts_verify(self):
        for name, doc in self.docs.items():
            ours, _ = self.assertAgree(doc, True, name)
            want = self.stream_id if name == "stream's receipt" else self.plain_id
            self.assertEqual(ours["request_id"], want, name)

    def test_tampered_members(self):
        """A member of each receipt changed: both verifiers refuse it."""
        for name, doc in self.docs.items():
            if name == "plain reply's header value":
                continue  # the same document as the plain reply's receipt
            obj = json.loads(doc)
            changes = list(tampers(obj)) + [(("request_id",), obj["request_id"] + "0"), (("sequence",), obj["sequence"] + 1),
                                            (("time",), obj["time"][:20] + "999999Z"), (("batch_index",), obj["batch_index"] + 1)]
            for path, new in changes:
                changed = json.dumps(replace(obj, path, new), separators=(",", ":")).encode()
                self.assertAgree(changed, False, "%s with %s = %r" % (name, "/".join(map(str, path)), new))

    def test_flipped_bytes(self):
        """A byte of each receipt flipped, some 60 spread over it: both
        verifiers refuse it."""
        for name, doc in self.docs.items():
            for i in range(0, len(doc), max(7, len(doc) // 60)):
                flipped = bytearray(doc)
                flipped[i] ^= 0x01
                self.assertAgree(bytes(flipped), False, "%s with byte %d flipped" % (name, i))

    def test_proof_of_the_promised_leaf(self):
        """The plain request's proof is of the leaf its receipt promised,
        and not of the stream's."""
        self.assertAgree(self.header, True, "the proof with its receipt", proof=self.proof)
        self.assertAgree(self.docs["stream's receipt"], False, "the proof with another request's receipt", proof=self.proof)
        ours, _ = self.both(self.docs["stream's receipt"], self.proof)
        self.assertEqual(ours["error"], "leaf_mismatch")


if __name__ == "__main__":
    unittest.main()


class LiveReceiptsECDSA(LiveReceipts):
    """The same, with an appliance issued an ECDSA P-256 key."""
    KEY_KIND = "ecdsa-p256"
