// Conformance of Tollgate's OpenAI-compatible surface with the official
// `openai` npm package: only baseURL and apiKey differ from talking to OpenAI.
// It starts the real binary (`tollgate dev`) on free ports with the test seed.
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
  dataDir = mkdtempSync(join(tmpdir(), 'tollgate-node-'));
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

test('models are listed and retrieved', async () => {
  const ids = [];
  for await (const m of client().models.list()) ids.push(m.id);
  assert.deepEqual(ids, ['builtin/echo', 'builtin/embed']);
  const echoOnly = [];
  for await (const m of client('tgk_test_acme_echo_only').models.list()) echoOnly.push(m.id);
  assert.deepEqual(echoOnly, ['builtin/echo']);
  const m = await client().models.retrieve('builtin/echo');
  assert.equal(m.id, 'builtin/echo');
  assert.equal(m.object, 'model');
});

test('chat completion, plain', async () => {
  const { data: c, response } = await client().chat.completions
    .create({ model: 'builtin/echo', messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hello big world' }] })
    .withResponse();
  assert.equal(c.object, 'chat.completion');
  assert.match(c.id, /^req_/);
  assert.equal(response.headers.get('x-request-id'), c.id);
  assert.equal(c.choices[0].message.content, 'hello big world');
  assert.equal(c.choices[0].message.role, 'assistant');
  assert.equal(c.choices[0].finish_reason, 'stop');
  assert.deepEqual(c.usage, { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 });
});

test('legacy completion, plain and streamed', async () => {
  const { data: c, response } = await client().completions
    .create({ model: 'builtin/echo', prompt: 'complete me', max_tokens: 16 })
    .withResponse();
  assert.equal(c.object, 'text_completion');
  assert.match(c.id, /^req_/);
  assert.equal(response.headers.get('x-request-id'), c.id);
  assert.equal(c.choices[0].text, 'complete me');
  assert.equal(c.choices[0].finish_reason, 'stop');
  assert.equal(c.usage.completion_tokens, 2);

  const stream = await client().completions.create({
    model: 'builtin/echo', prompt: 'one two three', stream: true, stream_options: { include_usage: true },
  });
  const texts = [];
  let usage = null;
  let finish = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const ch of chunk.choices) {
      if (ch.text) texts.push(ch.text);
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  assert.equal(texts.join(''), 'one two three');
  assert.equal(finish, 'stop');
  assert.equal(usage.completion_tokens, 3);

  await assert.rejects(
    client().completions.create({ model: 'builtin/echo', prompt: 'def f(', suffix: 'return x' }),
    (err) => err.status === 400 && err.param === 'suffix',
  );
});

test('chat completion, streamed with include_usage', async () => {
  const stream = await client().chat.completions.create({
    model: 'builtin/echo', stream: true, stream_options: { include_usage: true },
    messages: [{ role: 'user', content: 'one two three' }],
  });
  const deltas = [];
  let usage = null;
  const ids = new Set();
  for await (const chunk of stream) {
    ids.add(chunk.id);
    if (chunk.usage) usage = chunk.usage;
    for (const ch of chunk.choices) if (ch.delta.content) deltas.push(ch.delta.content);
  }
  assert.deepEqual(deltas, ['one ', 'two ', 'three']);
  assert.equal(ids.size, 1);
  assert.deepEqual(usage, { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 });
});

test('chat completion, streamed through the SDK accumulator', async () => {
  const runner = client().chat.completions.stream({
    model: 'builtin/echo', messages: [{ role: 'user', content: 'accumulate me please' }], max_tokens: 2,
  });
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.content, 'accumulate me');
  assert.equal(final.choices[0].finish_reason, 'length');
});

test('tool call round trip', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  const messages = [{ role: 'user', content: '/tool get_weather {"city":"Oslo"}' }];
  const first = await client().chat.completions.create({ model: 'builtin/echo', messages, tools });
  const msg = first.choices[0].message;
  assert.equal(first.choices[0].finish_reason, 'tool_calls');
  assert.equal(msg.content, null);
  assert.equal(msg.tool_calls.length, 1);
  assert.equal(msg.tool_calls[0].function.name, 'get_weather');
  assert.deepEqual(JSON.parse(msg.tool_calls[0].function.arguments), { city: 'Oslo' });

  // The same call streamed, accumulated by the SDK.
  const final = await client().chat.completions.stream({ model: 'builtin/echo', messages, tools }).finalChatCompletion();
  assert.equal(final.choices[0].message.tool_calls[0].function.arguments, '{"city":"Oslo"}');

  const second = await client().chat.completions.create({
    model: 'builtin/echo', tools,
    messages: [...messages, msg, { role: 'tool', tool_call_id: msg.tool_calls[0].id, content: 'sunny, 21 C' }],
  });
  assert.equal(second.choices[0].message.content, 'tool result: sunny, 21 C');
});

test('embeddings, float and base64', async () => {
  const input = ['hello world', 'tollgate'];
  const b64 = await client().embeddings.create({ model: 'builtin/embed', input }); // the SDK asks for base64
  const flt = await client().embeddings.create({ model: 'builtin/embed', input, encoding_format: 'float' });
  assert.equal(b64.data.length, 2);
  for (const i of [0, 1]) {
    assert.equal(flt.data[i].index, i);
    assert.equal(flt.data[i].embedding.length, 256);
    // base64 carries float32 bytes; the float format prints each float32 in
    // its shortest form, so rounding it back to float32 must match exactly.
    assert.deepEqual(Array.from(b64.data[i].embedding), flt.data[i].embedding.map(Math.fround));
    const norm = Math.sqrt(flt.data[i].embedding.reduce((s, x) => s + x * x, 0));
    assert.ok(Math.abs(norm - 1) < 1e-5, `norm ${norm}`);
  }
  assert.equal(flt.usage.prompt_tokens, 3);
  const small = await client().embeddings.create({ model: 'builtin/embed', input: 'x y z', dimensions: 16, encoding_format: 'float' });
  assert.equal(small.data[0].embedding.length, 16);
});

async function expectError(promise, status, code, type) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof OpenAI.APIError, `not an APIError: ${err}`);
    assert.equal(err.status, status);
    assert.equal(err.code, code);
    if (type) assert.equal(err.type, type);
    assert.match(err.error.request_id, /^req_/);
    return true;
  });
}

test('400 invalid_request', async () => {
  await expectError(client().chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: 'x' }] }), 400, 'invalid_request');
  await expectError(client().chat.completions.create({ model: 'builtin/echo', messages: [{ role: 'user', content: 'x' }], temperature: 3 }), 400, 'invalid_request');
  await expectError(client().chat.completions.create({ model: 'builtin/echo', messages: [] }), 400, 'invalid_request');
});

test('401 unauthorized', async () => {
  for (const key of ['tgk_nope', 'tgk_test_acme_revoked', 'tgk_test_acme_expired']) {
    await expectError(client(key).chat.completions.create({ model: 'builtin/echo', messages: [{ role: 'user', content: 'x' }] }), 401, 'unauthorized');
  }
});

test('403 policy_denied for a model outside the key', async () => {
  await expectError(client('tgk_test_acme_echo_only').embeddings.create({ model: 'builtin/embed', input: 'x' }), 403, 'policy_denied', 'policy');
});

test('503 model_unavailable', async () => {
  await expectError(client().chat.completions.create({ model: 'vllm/not-loaded', messages: [{ role: 'user', content: 'x' }] }), 503, 'model_unavailable');
});
