// Drives the central plane of a real `tollgate dev` with a TypeScript
// client generated from its OpenAPI document (openapi-typescript types,
// openapi-fetch client): requests through the gateway, heads published,
// then heads, a tree's history, inclusion and consistency proofs read
// through the client and checked with `tollgate verify`, which must refuse
// them after a byte is changed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import createClient from 'openapi-fetch';
import type { paths, components } from './build/central-api.js';

type Head = components['schemas']['v1Head'];

const here = dirname(fileURLToPath(import.meta.url)); // build/
const root = join(here, '..', '..', '..');
const bin = process.env.TOLLGATE_BIN ?? join(root, 'bin', 'tollgate');
const seed = join(here, '..', 'seed.yaml');
const key = 'tgk_test_central_acme';
const acmeToken = 'tga_test_central_acme';

let proc: ChildProcess;
let dataDir: string;
let gatewayURL: string;
let centralURL: string;

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'tollgate-central-'));
  proc = spawn(bin, ['dev', '--data', dataDir, '--gateway-addr', '127.0.0.1:0', '--grpc-addr', '127.0.0.1:0', '--portal-addr', '127.0.0.1:0',
    '--central-addr', '127.0.0.1:0', '--head-interval', '1s', '--seed', seed, '--log-level', 'warn'],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let stderr = '';
  proc.stderr!.on('data', (d) => { stderr += d; });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`tollgate dev did not start in 60s: ${out}${stderr}`)), 60_000);
    proc.stdout!.on('data', (d) => {
      out += d;
      const gw = out.match(/Base URL:\s+(http:\/\/\S+)\/v1/);
      const central = out.match(/Audit API: (http:\/\/[^/\s]+)\/v1/);
      if (gw?.[1] && central?.[1]) {
        gatewayURL = gw[1];
        centralURL = central[1];
        clearTimeout(timer);
        resolve();
      }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`tollgate dev exited ${code}: ${stderr}`)); });
  });
});

after(() => {
  proc?.kill('SIGTERM');
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

const client = (token?: string) => createClient<paths>({
  baseUrl: centralURL,
  headers: token ? { Authorization: `Bearer ${token}` } : {},
});

const today = () => new Date().toISOString().slice(0, 10);

// chat sends one request through the gateway and returns its request id.
async function chat(text: string): Promise<string> {
  const resp = await fetch(`${gatewayURL}/v1/chat/completions`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'builtin/echo', messages: [{ role: 'user', content: text }] }),
  });
  assert.equal(resp.status, 200);
  await resp.text();
  const id = resp.headers.get('x-request-id');
  assert.match(id ?? '', /^req_[a-z0-9]+$/);
  return id!;
}

// headWith polls the heads until the tenant's tree holds n events (heads
// are signed every --head-interval and forwarded within a second).
async function headWith(n: number): Promise<Head> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const { data, error } = await client(acmeToken).GET('/v1/tenants/{tenant_id}/audit/heads', {
      params: { path: { tenant_id: 'acme' }, query: { day: today() } },
    });
    assert.equal(error, undefined);
    const h = data!.data.find((h) => h.event_count >= n);
    if (h) return h;
    if (Date.now() > deadline) throw new Error(`no head with ${n} events: ${JSON.stringify(data)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function verify(kind: 'head' | 'proof' | 'consistency', doc: string): { status: number | null; verdict: any } {
  const file = join(dataDir, `${kind}-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, doc);
  const r = spawnSync(bin, ['verify', kind, file, '--ca', join(dataDir, 'fleet-ca.pem')], { encoding: 'utf8' });
  return { status: r.status, verdict: JSON.parse(r.stdout) };
}

test('heads and proofs through the generated client verify offline', async () => {
  const ids = [await chat('one'), await chat('two'), await chat('three')];
  const head = await headWith(3);
  assert.equal(head.tenant_id, 'acme');
  assert.match(head.appliance_id, /^app_/);
  assert.equal(typeof head.event_count, 'number');
  assert.equal(typeof head.last_sequence, 'number');
  assert.match(head.merkle_root, /^[0-9a-f]{64}$/);

  const heads = await client(acmeToken).GET('/v1/tenants/{tenant_id}/audit/heads', {
    params: { path: { tenant_id: 'acme' }, query: { day: today() } }, parseAs: 'text',
  });
  const headsDoc = heads.data as unknown as string;
  let v = verify('head', headsDoc);
  assert.equal(v.status, 0, JSON.stringify(v.verdict));
  assert.equal(v.verdict.ok, true);

  const params = { path: { tenant_id: 'acme' }, query: { appliance_id: head.appliance_id, day: today(), request_id: ids[1]! } };
  const typed = await client(acmeToken).GET('/v1/tenants/{tenant_id}/audit/proof', { params });
  assert.equal(typed.error, undefined);
  const proof = typed.data!;
  assert.equal(proof.request_id, ids[1]);
  assert.equal(proof.tree_size, proof.head.event_count);
  assert.ok(proof.audit_path.every((h) => /^[0-9a-f]{64}$/.test(h)));
  // The canonical leaf, a JSON string, binds the request the proof names.
  const leaf = JSON.parse(proof.leaf!);
  assert.equal(leaf.request_id, proof.request_id);
  assert.equal(leaf.sequence, proof.sequence);

  const raw = await client(acmeToken).GET('/v1/tenants/{tenant_id}/audit/proof', { params, parseAs: 'text' });
  const proofDoc = raw.data as unknown as string;
  v = verify('proof', proofDoc);
  assert.equal(v.status, 0, JSON.stringify(v.verdict));
  assert.equal(v.verdict.request_id, ids[1]);

  // One hex digit of the leaf hash changed: the inclusion fails (exit 11).
  const i = proofDoc.indexOf('"leaf_hash":"') + 13;
  const tampered = proofDoc.slice(0, i) + (proofDoc[i] === '0' ? '1' : '0') + proofDoc.slice(i + 1);
  v = verify('proof', tampered);
  assert.equal(v.status, 11);
  assert.equal(v.verdict.error, 'inclusion');
  // A count of the head changed: its signature fails (exit 9).
  v = verify('head', headsDoc.replace(`"event_count":${head.event_count}`, `"event_count":${head.event_count - 1}`));
  assert.equal(v.status, 9);
});

test('a tree\'s history and a consistency proof through the generated client verify offline', async () => {
  const first = await headWith(1);
  const from = first.event_count;
  await chat('later');
  const later = await headWith(from + 1);
  assert.equal(later.appliance_id, first.appliance_id);
  const tree = { appliance_id: first.appliance_id, day: today() };

  // Every head of the tree, oldest first, one a page.
  const history = (query: { from?: number; page_size?: number }) =>
    client(acmeToken).GET('/v1/tenants/{tenant_id}/audit/history', { params: { path: { tenant_id: 'acme' }, query: { ...tree, ...query } } });
  const whole = await history({});
  assert.equal(whole.error, undefined);
  assert.equal(whole.data!.next_from, undefined);
  const sizes = whole.data!.data.map((h) => h.event_count);
  assert.ok(sizes.includes(from) && sizes.includes(later.event_count), JSON.stringify(sizes));
  assert.deepEqual(sizes, [...sizes].sort((a, b) => a - b));
  const paged: number[] = [];
  for (let next: number | undefined = 0; next !== undefined;) {
    const page = await history({ from: next, page_size: 1 });
    assert.equal(page.error, undefined);
    paged.push(...page.data!.data.map((h) => h.event_count));
    next = page.data!.next_from;
    assert.ok(paged.length <= sizes.length, 'paging does not end');
  }
  assert.deepEqual(paged, sizes);
  const historyDoc = (await client(acmeToken).GET('/v1/tenants/{tenant_id}/audit/history', {
    params: { path: { tenant_id: 'acme' }, query: tree }, parseAs: 'text',
  })).data as unknown as string;
  let v = verify('head', historyDoc);
  assert.equal(v.status, 0, JSON.stringify(v.verdict));
  assert.equal(v.verdict.heads, sizes.length);

  // The later head extends the first: the proof verifies with the fleet CA.
  const params = { path: { tenant_id: 'acme' }, query: { ...tree, from_size: from, to_size: later.event_count } };
  const typed = await client(acmeToken).GET('/v1/tenants/{tenant_id}/audit/consistency', { params });
  assert.equal(typed.error, undefined);
  assert.equal(typed.data!.from_size, from);
  assert.equal(typed.data!.to_head.event_count, later.event_count);
  assert.ok(typed.data!.consistency_proof.every((h) => /^[0-9a-f]{64}$/.test(h)));
  const doc = (await client(acmeToken).GET('/v1/tenants/{tenant_id}/audit/consistency', { params, parseAs: 'text' })).data as unknown as string;
  v = verify('consistency', doc);
  assert.equal(v.status, 0, JSON.stringify(v.verdict));
  assert.equal(v.verdict.from_size, from);
  assert.equal(v.verdict.to_size, later.event_count);
  // The smaller head's size changed: it is no longer the document's (exit 10).
  v = verify('consistency', doc.replace(`"from_size":${from},`, `"from_size":${from + 1},`));
  assert.equal(v.status, 10);
  assert.equal(v.verdict.error, 'proof_mismatch');

  // Sizes no stored head has, in the envelope.
  const beyond = await client(acmeToken).GET('/v1/tenants/{tenant_id}/audit/consistency', {
    params: { path: { tenant_id: 'acme' }, query: { ...tree, from_size: from, to_size: 1_000_000 } },
  });
  assert.equal(beyond.response.status, 400);
  assert.equal(beyond.error?.error.code, 'size_out_of_range');
  const backwards = await client(acmeToken).GET('/v1/tenants/{tenant_id}/audit/consistency', {
    params: { path: { tenant_id: 'acme' }, query: { ...tree, from_size: later.event_count, to_size: from } },
  });
  assert.equal(backwards.response.status, 400);
  assert.match(backwards.error!.error.message, /to_size must be at least from_size/);
  const noTree = await client(acmeToken).GET('/v1/tenants/{tenant_id}/audit/consistency', {
    params: { path: { tenant_id: 'acme' }, query: { appliance_id: 'app_none', day: today(), from_size: 1 } },
  });
  assert.equal(noTree.response.status, 404);
  assert.equal(noTree.error?.error.code, 'head_not_found');
});

test('heads page through the generated client', async () => {
  await headWith(1);
  const list = (query: { day: string; page_size?: number; page_token?: string }) =>
    client(acmeToken).GET('/v1/tenants/{tenant_id}/audit/heads', { params: { path: { tenant_id: 'acme' }, query } });
  const whole = await list({ day: today() });
  assert.equal(whole.error, undefined);
  assert.equal(whole.data!.next_page_token, undefined);
  // One head a page: every head once, in order, no token after the last.
  const paged: string[] = [];
  let token: string | undefined;
  for (let pages = 0; ; pages++) {
    assert.ok(pages <= whole.data!.data.length, 'paging does not end');
    const page = await list({ day: today(), page_size: 1, ...(token ? { page_token: token } : {}) });
    assert.equal(page.error, undefined);
    assert.ok(page.data!.data.length <= 1);
    paged.push(...page.data!.data.map((h) => h.appliance_id));
    token = page.data!.next_page_token;
    if (token === undefined) break;
    assert.notEqual(token, '');
  }
  assert.deepEqual(paged, whole.data!.data.map((h) => h.appliance_id));
  // Parameters out of range name themselves.
  const bad = await list({ day: today(), page_size: 0 });
  assert.equal(bad.response.status, 400);
  assert.equal(bad.error?.error.code, 'invalid_request');
  assert.match(bad.error!.error.message, /page_size must be an integer from 1 to 1000/);
  const badToken = await list({ day: today(), page_size: 1, page_token: 'not-a-token' });
  assert.equal(badToken.response.status, 400);
  assert.match(badToken.error!.error.message, /page_token/);
});

test('errors use the envelope', async () => {
  const expectError = (r: { error?: { error: { code: string; request_id: string } }; response: Response }, status: number, code: string) => {
    assert.equal(r.response.status, status);
    assert.equal(r.error?.error.code, code);
    assert.match(r.error!.error.request_id, /^req_[a-z0-9]{26}$/);
  };
  const heads = (token: string | undefined, tenant: string, day: string) =>
    client(token).GET('/v1/tenants/{tenant_id}/audit/heads', { params: { path: { tenant_id: tenant }, query: { day } } });
  expectError(await heads(undefined, 'acme', today()), 401, 'unauthorized');
  expectError(await heads('tga_nobody_at_all', 'acme', today()), 401, 'unauthorized');
  expectError(await heads('tga_test_central_globex', 'acme', today()), 403, 'forbidden');
  expectError(await heads(acmeToken, 'acme', '2026-02-30'), 400, 'invalid_request');
  const proof = await client(acmeToken).GET('/v1/tenants/{tenant_id}/audit/proof', {
    params: { path: { tenant_id: 'acme' }, query: { appliance_id: 'app_none', day: today(), request_id: 'req_none' } },
  });
  expectError(proof, 404, 'request_not_found');
});

test('the served OpenAPI document is the generated one', async () => {
  const resp = await fetch(`${centralURL}/v1/openapi.json`);
  assert.equal(resp.status, 200);
  const committed = readFileSync(join(root, 'gen', 'tollgate', 'central', 'v1', 'central.swagger.json'), 'utf8');
  assert.equal(await resp.text(), committed);
});

// The forks endpoint's filters are optional (docs/central.md): the
// generated client calls it with none of them, and with some.
test('forks through the generated client without filters', async () => {
  const all = await client(acmeToken).GET('/v1/tenants/{tenant_id}/audit/forks', { params: { path: { tenant_id: 'acme' } } });
  assert.equal(all.response.status, 200, JSON.stringify(all.error));
  assert.deepEqual(all.data?.data ?? [], []);
  const today_ = await client(acmeToken).GET('/v1/tenants/{tenant_id}/audit/forks', {
    params: { path: { tenant_id: 'acme' }, query: { day: today() } },
  });
  assert.equal(today_.response.status, 200, JSON.stringify(today_.error));
});
