// Conformance of Tollgate's Responses API (/v1/responses) with the official
// `openai` npm package's responses.create, retrieve and delete. It starts its
// own `tollgate dev` (node --test runs each file in its own process).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';

const here = dirname(fileURLToPath(import.meta.url));
const bin = process.env.TOLLGATE_BIN ?? join(here, '..', '..', 'bin', 'tollgate');
const seed = join(here, '..', 'testdata', 'seed.yaml');

let proc;
let dataDir;
let baseURL;

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'tollgate-node-responses-'));
  proc = spawn(bin, ['dev', '--data', dataDir, '--gateway-addr', '127.0.0.1:0', '--grpc-addr', '127.0.0.1:0', '--portal-addr', '127.0.0.1:0', '--seed', seed], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  baseURL = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`tollgate dev did not start in 60s: ${out}${stderr}`)), 60_000);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/Base URL:\s+(\S+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`tollgate dev exited ${code}: ${stderr}`)); });
  });
});

after(async () => {
  if (proc && proc.exitCode === null) {
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await exited;
  }
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

const client = (apiKey = 'tgk_test_acme_all') => new OpenAI({ baseURL, apiKey, maxRetries: 0 });

const weather = [{ type: 'function', name: 'get_weather', parameters: { type: 'object' }, strict: false }];

test('responses.create, plain, then retrieved and deleted', async () => {
  const { data: r, response } = await client().responses
    .create({ model: 'builtin/echo', instructions: 'be brief', input: 'hello big world' })
    .withResponse();
  assert.equal(r.object, 'response');
  assert.equal(r.status, 'completed');
  assert.equal(r.output_text, 'hello big world');
  assert.equal(response.headers.get('x-request-id').replace(/^req_/, ''), r.id.replace(/^resp_/, ''));
  assert.deepEqual([r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens], [5, 3, 8]);
  const got = await client('tgk_test_acme_echo_only').responses.retrieve(r.id);
  assert.equal(got.output_text, 'hello big world');
  await client().responses.delete(r.id);
  await assert.rejects(client().responses.retrieve(r.id), (e) => e.status === 404 && e.code === 'not_found');
});

test('responses.create, streamed', async () => {
  const stream = await client().responses.create({ model: 'builtin/echo', input: 'one two three', stream: true });
  const types = [];
  let text = '';
  let seq = 0;
  let final;
  for await (const ev of stream) {
    assert.equal(ev.sequence_number, seq++);
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed') final = ev.response;
  }
  assert.equal(text, 'one two three');
  assert.deepEqual(types, [
    'response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added',
    'response.output_text.delta', 'response.output_text.delta', 'response.output_text.delta',
    'response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed',
  ]);
  assert.equal(final.status, 'completed');
  assert.equal(final.output[0].content[0].text, 'one two three');
});

test('responses.stream accumulates the final response', async () => {
  const final = await client().responses.stream({ model: 'builtin/echo', input: 'accumulate me' }).finalResponse();
  assert.equal(final.status, 'completed');
  assert.equal(final.output[0].content[0].text, 'accumulate me');
});

test('function tool round trip with previous_response_id', async () => {
  const first = await client().responses.create({ model: 'builtin/echo', tools: weather, input: '/tool get_weather {"city":"Oslo"}' });
  assert.equal(first.output.length, 1);
  const call = first.output[0];
  assert.equal(call.type, 'function_call');
  assert.equal(call.name, 'get_weather');
  assert.equal(call.arguments, '{"city":"Oslo"}');
  const second = await client().responses.create({
    model: 'builtin/echo', tools: weather, previous_response_id: first.id,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: 'sunny' }],
  });
  assert.equal(second.output_text, 'tool result: sunny');
  assert.equal(second.previous_response_id, first.id);
});

test('403 policy_denied for a tool outside the key\'s scopes', async () => {
  await assert.rejects(
    client().responses.create({
      model: 'builtin/echo', input: '/tool delete_database {}',
      tools: [{ type: 'function', name: 'delete_database', parameters: { type: 'object' }, strict: false }],
    }),
    (e) => e.status === 403 && e.code === 'policy_denied',
  );
});
