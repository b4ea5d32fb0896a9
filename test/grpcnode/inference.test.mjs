// A Node.js service calling the appliance's gRPC InferenceService, as an
// internal microservice not written in Go does: @grpc/grpc-js with the
// protos of proto/ loaded at run time by @grpc/proto-loader, and the error
// details of docs/grpc.md decoded from the grpc-status-details-bin trailer
// with the google.rpc protos of the google-proto-files package. It starts
// the real binary (`tollgate dev`) on free ports with the test seed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, isAbsolute } from 'node:path';
import { fileURLToPath } from 'node:url';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import protobuf from 'protobufjs';
import googleProtoFiles from 'google-proto-files';

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, '..', '..');
const bin = process.env.TOLLGATE_BIN ?? join(repo, 'bin', 'tollgate');
const seed = join(repo, 'test', 'testdata', 'seed.yaml');
// buf/validate/validate.proto, linked from the Go module cache at the
// version tools/go.mod pins (`make protodeps`).
const protovalidate = join(repo, '.protodeps', 'protovalidate');
if (!existsSync(join(protovalidate, 'buf', 'validate', 'validate.proto'))) {
  throw new Error(`${protovalidate} holds no buf/validate/validate.proto: run make protodeps`);
}

const packageDefinition = protoLoader.loadSync('tollgate/inference/v1/inference.proto', {
  includeDirs: [join(repo, 'proto'), protovalidate],
  keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true,
});
const { InferenceService } = grpc.loadPackageDefinition(packageDefinition).tollgate.inference.v1;

// The types a google.rpc.Status may carry as details: google.rpc's own
// (status.proto, error_details.proto) and protovalidate's Violations.
const detailTypes = new protobuf.Root();
// getProtoPath() is the package's google/ directory; imports name files from its parent.
const detailDirs = [googleProtoFiles.getProtoPath('..'), protovalidate];
const findProto = (name) => (isAbsolute(name) ? name : detailDirs.map((d) => join(d, name)).find((p) => existsSync(p)) ?? name);
detailTypes.resolvePath = (_origin, target) => findProto(target);
detailTypes.loadSync(['google/rpc/status.proto', 'google/rpc/error_details.proto', 'buf/validate/validate.proto'].map(findProto), { keepCase: true });
const Status = detailTypes.lookupType('google.rpc.Status');
const toObject = { longs: Number, enums: String, defaults: true };

let proc;
let dataDir;
let baseURL;
let client;

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'tollgate-grpcnode-'));
  proc = spawn(bin, ['dev', '--data', dataDir, '--gateway-addr', '127.0.0.1:0', '--grpc-addr', '127.0.0.1:0',
    '--portal-addr', '127.0.0.1:0', '--central-addr', '127.0.0.1:0', '--seed', seed, '--log-level', 'warn'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  let grpcAddr;
  await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`tollgate dev did not start in 60s: ${out}${stderr}`)), 60_000);
    proc.stdout.on('data', (d) => {
      out += d;
      const base = out.match(/Base URL:\s+(\S+)/);
      const addr = out.match(/gRPC:\s+(\S+)/);
      if (base && addr) { clearTimeout(timer); baseURL = base[1]; grpcAddr = addr[1]; resolve(); }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`tollgate dev exited ${code}: ${stderr}`)); });
  });
  client = new InferenceService(grpcAddr, grpc.credentials.createInsecure());
});

after(async () => {
  client?.close();
  if (proc && proc.exitCode === null) {
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await exited;
  }
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

const ALL = 'tgk_test_acme_all';

const withKey = (key) => {
  const md = new grpc.Metadata();
  if (key) md.set('authorization', `Bearer ${key}`);
  return md;
};

const userChat = (model, text, extra = {}) => ({ model, messages: [{ role: 'ROLE_USER', text }], ...extra });

// chat streams a ChatCompletion to its end: the events, the header
// metadata, the final status (its metadata is the trailer) and the error
// the call ended with, if any.
function chat(key, req) {
  return new Promise((resolve) => {
    const call = client.ChatCompletion(req, withKey(key));
    const r = { events: [], header: null, status: null, error: null };
    call.on('metadata', (md) => { r.header = md; });
    call.on('data', (ev) => r.events.push(ev));
    call.on('error', (err) => { r.error = err; });
    call.on('status', (st) => { r.status = st; });
    call.on('end', () => resolve(r));
  });
}

// unary makes a unary call: its response, header metadata, status and error.
function unary(method, key, req) {
  return new Promise((resolve) => {
    const r = { response: null, header: null, status: null, error: null };
    const call = client[method](req, withKey(key), (err, res) => { r.error = err; r.response = res; });
    call.on('metadata', (md) => { r.header = md; });
    call.on('status', (st) => { r.status = st; resolve(r); });
  });
}

const ok = (r) => {
  assert.equal(r.error, null, `call failed: ${r.error?.code} ${r.error?.details}`);
  return r;
};

// details decodes the google.rpc.Status of the grpc-status-details-bin
// trailer of a failed call, and each of its details by its type URL.
function details(err) {
  assert.ok(err, 'the call succeeded');
  const [bin] = err.metadata.get('grpc-status-details-bin');
  assert.ok(Buffer.isBuffer(bin), `no grpc-status-details-bin trailer (code ${err.code}: ${err.details})`);
  const st = Status.decode(bin);
  assert.equal(st.code, err.code, 'the details Status has the call status code');
  assert.equal(st.message, err.details, 'the details Status has the call status message');
  const byType = {};
  for (const any of st.details) {
    const type = detailTypes.lookupType(any.type_url.slice(any.type_url.lastIndexOf('/') + 1));
    byType[type.fullName.slice(1)] = type.toObject(type.decode(any.value), toObject);
  }
  return byType;
}

// refusal checks that the call failed with code and an ErrorInfo of
// reason carrying its request id, which the x-request-id trailer (and
// header, when one was sent) repeats, and returns all the details.
function refusal(r, code, reason) {
  assert.ok(r.error, 'the call succeeded');
  assert.equal(r.error.code, code, `code ${grpc.status[r.error.code]} (${r.error.details}), want ${grpc.status[code]}`);
  const d = details(r.error);
  const info = d['google.rpc.ErrorInfo'];
  assert.ok(info, `no ErrorInfo in ${Object.keys(d)}`);
  assert.equal(info.domain, 'tollgate.dev');
  assert.equal(info.reason, reason);
  assert.match(info.metadata.request_id, /^req_[A-Za-z0-9]+$/);
  assert.deepEqual(r.error.metadata.get('x-request-id'), [info.metadata.request_id], 'x-request-id trailer');
  const header = r.header?.get('x-request-id') ?? [];
  if (header.length) assert.deepEqual(header, [info.metadata.request_id], 'x-request-id header');
  return d;
}

const content = (events) => events.map((ev) => ev.content).join('');

// Exactly one event, the last, carries the finish reason and the usage.
function finalEvent(events) {
  assert.ok(events.length > 0, 'no events');
  const last = events.at(-1);
  for (const ev of events.slice(0, -1)) {
    assert.equal(ev.finish_reason, 'FINISH_REASON_UNSPECIFIED');
    assert.equal(ev.usage, null);
  }
  assert.notEqual(last.finish_reason, 'FINISH_REASON_UNSPECIFIED');
  assert.ok(last.usage, 'the final event has no usage');
  return last;
}

function requestId(r) {
  const [id] = r.header.get('x-request-id');
  assert.match(id, /^req_[A-Za-z0-9]+$/);
  return id;
}

async function http(path, body) {
  const res = await fetch(`${baseURL}${path}`, {
    method: 'POST', headers: { authorization: `Bearer ${ALL}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  assert.equal(res.status, 200);
  return res.json();
}

test('models are the key\'s', async () => {
  const all = ok(await unary('ListModels', ALL, {}));
  assert.deepEqual(all.response.models.map((m) => [m.id, m.kind, m.owned_by]),
    [['builtin/echo', 'MODEL_KIND_CHAT', 'tollgate'], ['builtin/embed', 'MODEL_KIND_EMBEDDING', 'tollgate']]);
  requestId(all);
  assert.deepEqual(all.header.get('x-ratelimit-limit-requests'), ['100000']);
  assert.deepEqual(all.header.get('x-ratelimit-limit-tokens'), ['100000000']);
  const echoOnly = ok(await unary('ListModels', 'tgk_test_acme_echo_only', {}));
  assert.deepEqual(echoOnly.response.models.map((m) => m.id), ['builtin/echo']);
});

test('chat, the accumulated stream is the plain HTTP reply', async () => {
  const messages = [{ role: 'ROLE_SYSTEM', text: 'be brief' }, { role: 'ROLE_USER', text: 'hello big world' }];
  const r = ok(await chat(ALL, { model: 'builtin/echo', messages }));
  const last = finalEvent(r.events);
  assert.equal(content(r.events), 'hello big world');
  assert.equal(last.finish_reason, 'FINISH_REASON_STOP');
  assert.deepEqual(last.usage, { prompt_tokens: 5, completion_tokens: 3 });
  requestId(r);

  const plain = await http('/chat/completions', {
    model: 'builtin/echo', messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hello big world' }],
  });
  assert.equal(plain.choices[0].message.content, content(r.events));
  assert.equal(plain.choices[0].finish_reason, 'stop');
  assert.deepEqual(plain.usage, { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 });
});

test('chat, streamed event by event', async () => {
  const r = ok(await chat(ALL, userChat('builtin/echo', 'one two three')));
  assert.deepEqual(r.events.map((ev) => ev.content), ['one ', 'two ', 'three', '']);
  const last = finalEvent(r.events);
  assert.equal(last.finish_reason, 'FINISH_REASON_STOP');
  assert.deepEqual(last.usage, { prompt_tokens: 3, completion_tokens: 3 });
  assert.equal(r.status.code, grpc.status.OK);

  const cut = ok(await chat(ALL, userChat('builtin/echo', 'accumulate me please', { max_tokens: 2 })));
  assert.equal(content(cut.events), 'accumulate me');
  assert.equal(finalEvent(cut.events).finish_reason, 'FINISH_REASON_LENGTH');
  assert.deepEqual(finalEvent(cut.events).usage, { prompt_tokens: 3, completion_tokens: 2 });
});

test('chat, a tool call in scope', async () => {
  const r = ok(await chat(ALL, userChat('builtin/echo', '/tool get_weather {"city":"Oslo"}', {
    tools: [{ name: 'get_weather', parameters_json: '{"type":"object","properties":{"city":{"type":"string"}}}' }],
  })));
  const last = finalEvent(r.events);
  assert.equal(last.finish_reason, 'FINISH_REASON_TOOL_CALLS');
  const deltas = r.events.flatMap((ev) => ev.tool_calls);
  assert.equal(deltas[0].name, 'get_weather');
  assert.match(deltas[0].id, /./);
  assert.deepEqual(JSON.parse(deltas.map((d) => d.arguments).join('')), { city: 'Oslo' });
  assert.equal(content(r.events), '');
});

test('embeddings are the HTTP embeddings as float32', async () => {
  const input = ['hello world', 'tollgate'];
  const r = ok(await unary('Embed', ALL, { model: 'builtin/embed', inputs: input.map((text) => ({ text })) }));
  requestId(r);
  assert.equal(r.response.embeddings.length, 2);
  assert.deepEqual(r.response.usage, { prompt_tokens: 3, completion_tokens: 0 });
  const plain = await http('/embeddings', { model: 'builtin/embed', input, encoding_format: 'float' });
  for (const i of [0, 1]) {
    assert.equal(r.response.embeddings[i].values.length, 256);
    assert.deepEqual(r.response.embeddings[i].values, plain.data[i].embedding.map(Math.fround));
  }
  const small = ok(await unary('Embed', ALL, { model: 'builtin/embed', inputs: [{ text: 'x y z' }], dimensions: 16 }));
  assert.equal(small.response.embeddings[0].values.length, 16);
});

test('no key: UNAUTHENTICATED, unauthorized, on every method', async (t) => {
  const calls = {
    ListModels: () => unary('ListModels', null, {}),
    ChatCompletion: () => chat(null, userChat('builtin/echo', 'hi')),
    Embed: () => unary('Embed', null, { model: 'builtin/embed', inputs: [{ text: 'x' }] }),
    CountTokens: () => unary('CountTokens', null, userChat('builtin/echo', 'hi')),
  };
  for (const [method, call] of Object.entries(calls)) {
    const r = await call();
    assert.deepEqual(r.events ?? [], [], `${method} served events`);
    await t.test(method, () => { refusal(r, grpc.status.UNAUTHENTICATED, 'unauthorized'); });
  }
});

test('a revoked key: UNAUTHENTICATED', async () => {
  const r = await chat('tgk_test_acme_revoked', userChat('builtin/echo', 'hi'));
  assert.deepEqual(r.events, []);
  refusal(r, grpc.status.UNAUTHENTICATED, 'unauthorized');
});

test('a tool out of the key\'s scopes: PERMISSION_DENIED, policy_denied, with the decision', async () => {
  const tool = (name) => ({ name, parameters_json: '{"type":"object"}' });
  const r = await chat(ALL, userChat('builtin/echo', '/tool delete_database {}', { tools: [tool('get_weather'), tool('delete_database')] }));
  assert.deepEqual(r.events, []);
  const d = refusal(r, grpc.status.PERMISSION_DENIED, 'policy_denied');
  assert.match(d['google.rpc.ErrorInfo'].metadata.policy_decision_id, /^dec_/);
  assert.match(r.error.details, /delete_database/);
});

test('a model no engine serves: UNAVAILABLE, model_unavailable', async () => {
  const r = await chat(ALL, userChat('builtin/no-such-model', 'hi'));
  assert.deepEqual(r.events, []);
  refusal(r, grpc.status.UNAVAILABLE, 'model_unavailable');
});

test('no messages: INVALID_ARGUMENT, invalid_request, with a BadRequest', async () => {
  const r = await chat(ALL, { model: 'builtin/echo', messages: [] });
  assert.deepEqual(r.events, []);
  const d = refusal(r, grpc.status.INVALID_ARGUMENT, 'invalid_request');
  const fields = d['google.rpc.BadRequest']?.field_violations ?? [];
  assert.ok(fields.some((v) => v.field === 'messages' && v.description), `BadRequest ${JSON.stringify(d['google.rpc.BadRequest'])}`);
  const violations = d['buf.validate.Violations']?.violations ?? [];
  assert.ok(violations.some((v) => v.rule_id === 'repeated.min_items'), `Violations ${JSON.stringify(d['buf.validate.Violations'])}`);
});

test('over the key\'s tokens per day: RESOURCE_EXHAUSTED, rate_limited, with a RetryInfo', async () => {
  const r = await chat('tgk_test_acme_small_day', userChat('builtin/echo', 'hi', { max_tokens: 1000 }));
  assert.deepEqual(r.events, []);
  const d = refusal(r, grpc.status.RESOURCE_EXHAUSTED, 'rate_limited');
  const delay = d['google.rpc.RetryInfo']?.retry_delay;
  assert.ok(delay && (delay.seconds > 0 || delay.nanos > 0), `RetryInfo ${JSON.stringify(d['google.rpc.RetryInfo'])}`);
  assert.deepEqual(r.header.get('x-ratelimit-limit-tokens'), ['64']);
  const [retryAfter] = r.header.get('retry-after');
  assert.ok(Number(retryAfter) >= 1, `retry-after ${retryAfter}`);
});
