// Conformance with the Vercel AI SDK's default OpenAI provider, which calls
// the Responses API (POST /v1/responses): `openai('builtin/echo')` with only
// baseURL and apiKey changed. It starts its own `tollgate dev`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText, tool, jsonSchema, stepCountIs } from 'ai';

const here = dirname(fileURLToPath(import.meta.url));
const bin = process.env.TOLLGATE_BIN ?? join(here, '..', '..', 'bin', 'tollgate');
const seed = join(here, '..', 'testdata', 'seed.yaml');

let proc;
let dataDir;
let openai;

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'tollgate-node-aisdk-'));
  proc = spawn(bin, ['dev', '--data', dataDir, '--gateway-addr', '127.0.0.1:0', '--grpc-addr', '127.0.0.1:0', '--portal-addr', '127.0.0.1:0', '--seed', seed], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const baseURL = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`tollgate dev did not start in 60s: ${out}${stderr}`)), 60_000);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/Base URL:\s+(\S+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`tollgate dev exited ${code}: ${stderr}`)); });
  });
  openai = createOpenAI({ baseURL, apiKey: 'tgk_test_acme_all' });
});

after(async () => {
  if (proc && proc.exitCode === null) {
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await exited;
  }
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

test('generateText', async () => {
  const r = await generateText({ model: openai('builtin/echo'), system: 'be brief', prompt: 'hello big world', maxRetries: 0 });
  assert.equal(r.text, 'hello big world');
  assert.equal(r.finishReason, 'stop');
  assert.equal(r.usage.inputTokens, 5);
  assert.equal(r.usage.outputTokens, 3);
  assert.match(r.response.id, /^resp_/);
});

test('streamText', async () => {
  const s = streamText({ model: openai('builtin/echo'), prompt: 'one two three', maxRetries: 0 });
  let text = '';
  for await (const t of s.textStream) text += t;
  assert.equal(text, 'one two three');
  assert.equal(await s.finishReason, 'stop');
});

test('a tool round trip with stopWhen', async () => {
  const calls = [];
  const r = await generateText({
    model: openai('builtin/echo'),
    prompt: '/tool get_weather {"city":"Oslo"}',
    tools: {
      get_weather: tool({
        description: 'the weather in a city',
        inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string' } } }),
        execute: async ({ city }) => { calls.push(city); return `sunny in ${city}`; },
      }),
    },
    stopWhen: stepCountIs(3),
    maxRetries: 0,
  });
  assert.deepEqual(calls, ['Oslo']);
  assert.equal(r.steps.length, 2);
  assert.match(r.text, /^tool result: .*sunny in Oslo/);
});

test('a tool round trip, streamed', async () => {
  const s = streamText({
    model: openai('builtin/echo'),
    prompt: '/tool get_weather {"city":"Bergen"}',
    tools: {
      get_weather: tool({
        inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string' } } }),
        execute: async ({ city }) => `rainy in ${city}`,
      }),
    },
    stopWhen: stepCountIs(3),
    maxRetries: 0,
  });
  let text = '';
  for await (const t of s.textStream) text += t;
  assert.match(text, /^tool result: .*rainy in Bergen/);
});

test('a conversation continued with response.messages (item references)', async () => {
  const first = await generateText({ model: openai('builtin/echo'), prompt: 'first turn', maxRetries: 0 });
  const messages = [{ role: 'user', content: 'first turn' }, ...first.response.messages, { role: 'user', content: 'second turn' }];
  const second = await generateText({ model: openai('builtin/echo'), messages, maxRetries: 0 });
  assert.equal(second.text, 'second turn');
  // The first reply came back as a reference to the stored item: the
  // prompt counts its two tokens.
  assert.equal(second.usage.inputTokens, 6);
});
