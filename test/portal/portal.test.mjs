// The operator portal in a real browser: headless Chromium (Debian's
// package, driven by playwright-core) against `tollgate dev` started on
// free ports. A tenant administrator signs in with the password dev shows
// once, creates a key, reads its secret once, uses it at the gateway,
// and revokes it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createHmac } from 'node:crypto';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const bin = process.env.TOLLGATE_BIN ?? join(here, '..', '..', 'bin', 'tollgate');
const chromiumPath = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium';

let proc;
let dataDir;
let browser;
let portalURL;
let baseURL;
let password;

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'tollgate-portal-'));
  proc = spawn(bin, ['dev', '--data', dataDir, '--gateway-addr', '127.0.0.1:0', '--grpc-addr', '127.0.0.1:0',
    '--portal-addr', '127.0.0.1:0', '--central-addr', '127.0.0.1:0',
    // The tests sign in about a dozen times from one address, faster than
    // the default 10 a minute allows (a fast run got 429).
    '--portal-sign-ins-per-address', '100'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const out = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`tollgate dev did not start in 60s: ${out}${stderr}`)), 60_000);
    proc.stdout.on('data', (d) => {
      out += d;
      if (/Demo key:/.test(out)) { clearTimeout(timer); resolve(out); }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`tollgate dev exited ${code}: ${stderr}`)); });
  });
  portalURL = out.match(/Portal:\s+(\S+)/)[1];
  baseURL = out.match(/Base URL:\s+(\S+)/)[1];
  password = out.match(/tenant demo, user admin, password (\S+)/)[1];
  // The flags a locked-down machine needs: no sandbox as root, and no
  // background connections to Google's hosts.
  browser = await chromium.launch({
    executablePath: chromiumPath,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  if (browser) await browser.close();
  if (proc && proc.exitCode === null) {
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await exited;
  }
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

// failedResource reports whether a failed request is a page's resource
// that could not be had. A load the browser abandoned because the page
// navigated away meanwhile (a form submitted before its stylesheet
// arrived) fails as net::ERR_ABORTED: that is the test clicking fast, not
// a broken resource; a refused or missing one fails otherwise, or answers
// with an error status, which the response handler catches.
const failedResource = (r) => r.resourceType() !== 'document' && r.failure()?.errorText !== 'net::ERR_ABORTED';

const models = (key) => fetch(`${baseURL}/models`, { headers: { Authorization: `Bearer ${key}` } });

// Waits until the gateway answers want for key: its key cache follows
// etcd's watch, in well under a second.
async function gatewaySays(key, want) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { status } = await models(key);
    if (status === want) return;
    assert.ok(Date.now() < deadline, `the gateway answers ${status} for the key, want ${want}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('an administrator creates, uses and revokes a key', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  // What a page must not cause: a Content-Security-Policy violation, or a
  // stylesheet, icon or other resource that fails. (A page's own 4xx, a
  // refused sign-in, is expected.)
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error' && /Content Security Policy/.test(m.text())) errors.push(m.text()); });
  const subresource = (r) => r.resourceType() !== 'document';
  page.on('requestfailed', (r) => { if (failedResource(r)) errors.push(`${r.url()}: ${r.failure()?.errorText}`); });
  page.on('response', (r) => { if (subresource(r.request()) && r.status() >= 400) errors.push(`${r.url()}: ${r.status()}`); });

  await page.goto(portalURL);
  assert.match(page.url(), /\/login$/, 'signed out, the portal opens at its sign-in page');

  await page.fill('#tenant-input', 'demo');
  await page.fill('#user', 'admin');
  await page.fill('#password', 'not the password');
  await page.click('#sign-in');
  assert.match(await page.textContent('#error'), /Sign-in failed/);

  await page.fill('#password', password);
  await page.click('#sign-in');
  await page.waitForSelector('table#keys');
  assert.equal(await page.textContent('#tenant'), 'demo');
  // dev's own demo key is listed, with its hint, never a secret.
  assert.equal(await page.locator('tr[data-key-id] td.label', { hasText: 'demo' }).count(), 1);

  await page.click('#new-key');
  await page.fill('#label', 'browser key');
  await page.check('#models-some');
  await page.check('input[name=model][value="builtin/echo"]');
  await page.fill('#rpm', '120');
  await page.fill('#tpd', '50000');
  await page.fill('#max-output-tokens', '2');
  await page.fill('#tools', 'get_weather');
  await page.click('#create');

  const secret = (await page.textContent('#secret')).trim();
  const keyID = (await page.textContent('#key-id')).trim();
  assert.match(secret, /^tgk_[A-Za-z0-9_-]{43}$/);
  assert.match(await page.textContent('.warning'), /only time it is shown/);

  await gatewaySays(secret, 200);
  const chat = await fetch(`${baseURL}/chat/completions`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${secret}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'builtin/echo', messages: [{ role: 'user', content: 'from the portal' }] }),
  });
  assert.equal(chat.status, 200);
  // The key's maximum of two tokens a reply cuts the echo.
  const choice = (await chat.json()).choices[0];
  assert.equal(choice.message.content, 'from the');
  assert.equal(choice.finish_reason, 'length');
  const embed = await fetch(`${baseURL}/embeddings`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${secret}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'builtin/embed', input: 'x' }),
  });
  assert.equal(embed.status, 403, 'the key allows builtin/echo only');

  await page.click('#back');
  const row = page.locator(`tr[data-key-id="${keyID}"]`);
  assert.equal(await row.locator('td.state').textContent(), 'active');
  assert.ok(!(await page.content()).includes(secret), 'the list shows the secret');
  assert.match(await row.textContent(), /builtin\/echo/);
  assert.match(await row.textContent(), /50,000/);
  assert.equal((await row.locator('td.max-output').textContent()).trim(), '2');
  assert.match(await row.textContent(), /get_weather/);

  // Revoking asks first, naming the key; cancelling changes nothing.
  await row.getByRole('link', { name: 'Revoke…' }).click();
  assert.equal((await page.textContent('#key-id')).trim(), keyID);
  await page.click('#cancel');
  assert.equal(await page.locator(`tr[data-key-id="${keyID}"] td.state`).textContent(), 'active');
  await gatewaySays(secret, 200);
  await page.locator(`tr[data-key-id="${keyID}"]`).getByRole('link', { name: 'Revoke…' }).click();
  await page.click('#confirm-revoke');
  assert.match(await page.textContent('#notice'), new RegExp(keyID));
  assert.equal(await page.locator(`tr[data-key-id="${keyID}"] td.state`).textContent(), 'revoked');
  await gatewaySays(secret, 401);

  await page.click('#sign-out');
  assert.match(page.url(), /\/login$/);
  await page.goto(portalURL);
  assert.match(page.url(), /\/login$/, 'signed out, the list is gone');
  assert.deepEqual(errors, [], 'a CSP violation or a failed resource');
  await context.close();
});

test('the form shows what is wrong and creates nothing', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${portalURL}login`);
  await page.fill('#tenant-input', 'demo');
  await page.fill('#user', 'admin');
  await page.fill('#password', password);
  await page.click('#sign-in');
  await page.waitForSelector('table#keys');
  const before = await page.locator('tr[data-key-id]').count();

  await page.click('#new-key');
  await page.fill('#label', 'demo');
  await page.fill('#rpm', 'lots');
  await page.fill('#tools', 'get weather!');
  await page.click('#create');
  assert.match(await page.textContent('#rpm-error'), /whole number/);
  assert.match(await page.textContent('#tools-error'), /not a tool name/);
  assert.equal(await page.inputValue('#rpm'), 'lots', 'the form keeps what was typed');

  // Once the fields are right, the label is found taken.
  await page.fill('#rpm', '10');
  await page.fill('#tools', '');
  await page.click('#create');
  assert.match(await page.textContent('#label-error'), /already has a key with this label/);
  assert.equal(await page.locator('#secret').count(), 0);

  await page.goto(portalURL);
  assert.equal(await page.locator('tr[data-key-id]').count(), before);
  await context.close();
});

test('an administrator changes their password', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const signIn = async (pw) => {
    await page.goto(`${portalURL}login`);
    await page.fill('#tenant-input', 'demo');
    await page.fill('#user', 'admin');
    await page.fill('#password', pw);
    await page.click('#sign-in');
  };
  await signIn(password);
  await page.click('#account');
  const next = 'a brand new passphrase';
  await page.fill('#current', password);
  await page.fill('#new', next);
  await page.fill('#confirm', next);
  await page.click('#change');
  assert.match(await page.textContent('#notice'), /password is changed/);

  await page.click('#sign-out');
  await signIn(password);
  assert.match(await page.textContent('#error'), /Sign-in failed/, 'the old password still works');
  await signIn(next);
  await page.waitForSelector('table#keys');
  password = next;
  await context.close();
});

// A time-based code (RFC 6238: HMAC-SHA-1, 6 digits, 30 s) of a base32
// secret, as an authenticator app makes it.
function totp(secretBase32, unixSeconds) {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = '';
  for (const c of secretBase32.replace(/\s+/g, '')) bits += alphabet.indexOf(c).toString(2).padStart(5, '0');
  const key = Buffer.from(bits.match(/.{8}/g).map((b) => parseInt(b, 2)));
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(unixSeconds / 30)));
  const mac = createHmac('sha1', key).update(counter).digest();
  const off = mac[mac.length - 1] & 0xf;
  return String((mac.readUInt32BE(off) & 0x7fffffff) % 1_000_000).padStart(6, '0');
}

test('an administrator turns two-step sign-in on and signs in with a code', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error' && /Content Security Policy/.test(m.text())) errors.push(m.text()); });
  page.on('requestfailed', (r) => { if (failedResource(r)) errors.push(`${r.url()}: ${r.failure()?.errorText}`); });
  page.on('response', (r) => { if (r.request().resourceType() !== 'document' && r.status() >= 400) errors.push(`${r.url()}: ${r.status()}`); });
  const signIn = async (code) => {
    await page.goto(`${portalURL}login`);
    await page.fill('#tenant-input', 'demo');
    await page.fill('#user', 'admin');
    await page.fill('#password', password);
    if (code !== undefined) await page.fill('#code', code);
    await page.click('#sign-in');
  };
  await signIn();
  await page.waitForSelector('table#keys');
  await page.click('#account');
  await page.click('#two-step-link');
  // The QR code is an image the page's policy allows, and it loads.
  const qrWidth = await page.locator('#qr').evaluate(async (img) => { await img.decode(); return img.naturalWidth; });
  assert.ok(qrWidth >= 200, `the QR code is ${qrWidth} pixels wide`);
  const secret = await page.textContent('#totp-secret');
  await page.fill('#code', totp(secret, Date.now() / 1000));
  await page.fill('#current', password);
  await page.click('#two-step-on');
  assert.match(await page.textContent('#notice'), /Two-step sign-in is on/);

  await page.click('#sign-out');
  await signIn();
  assert.match(await page.textContent('#error'), /Sign-in failed/, 'a sign-in without the code');
  // The next period's code: the one that turned it on is spent.
  await signIn(totp(secret, Date.now() / 1000 + 30));
  await page.waitForSelector('table#keys');
  assert.deepEqual(errors, []);
  await context.close();
});
