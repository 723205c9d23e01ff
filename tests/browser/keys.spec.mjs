// Drives the console's API keys page in the system Chromium (playwright-core): create a key
// with two scopes (its secret is shown once, then never again), revoke it, create and roll
// another. Prints every secret it saw as `secret <label> <secret>` for the Rust side to try
// against the API, and `N passed, N failed`; exits non-zero on any failure.
//
// Environment: ENGRAM_URL, ENGRAM_CONSOLE_EMAIL, ENGRAM_CONSOLE_PASSWORD.

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const artifacts = path.join(here, 'artifacts');
const base = process.env.ENGRAM_URL.replace(/\/+$/, '');
const timeout = Number(process.env.ENGRAM_BROWSER_TIMEOUT_MS ?? 120000);

let passed = 0;
let failed = 0;
async function check(name, fn) {
  const started = Date.now();
  try {
    await fn();
    passed += 1;
    console.log(`ok   - ${name} (${Date.now() - started} ms)`);
    return true;
  } catch (err) {
    failed += 1;
    console.log(`FAIL - ${name}: ${err && err.message ? err.message : err}`);
    return false;
  }
}
function assert(condition, message) {
  if (!condition) throw new Error(message);
}
async function row(page, label) {
  const locator = page.locator(`[data-testid="key-row"][data-label="${label}"]`);
  await locator.waitFor();
  return locator;
}
async function until(what, probe) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const value = await probe().catch(() => false);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--no-first-run', '--disable-sync', '--disable-quic'],
});
try {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 860 } })).newPage();
  page.setDefaultTimeout(timeout);
  const browserErrors = [];
  page.on('pageerror', (err) => browserErrors.push(`pageerror: ${err.message}`));
  let firstSecret;
  const steps = [
    ['sign in and open the API keys page', async () => {
      await page.goto(`${base}/console/login`);
      await page.waitForSelector('[data-testid="console-root"][data-hydrated="true"]');
      await page.getByTestId('login-email').fill(process.env.ENGRAM_CONSOLE_EMAIL);
      await page.getByTestId('login-password').fill(process.env.ENGRAM_CONSOLE_PASSWORD);
      await page.getByTestId('login-submit').click();
      await page.waitForURL((url) => url.pathname === '/console/memories');
      await page.getByTestId('nav-keys').click();
      await page.waitForURL((url) => url.pathname === '/console/keys');
      await page.waitForSelector('[data-testid="console-root"][data-hydrated="true"]');
      await row(page, 'default');
    }],
    ['creating a key shows its secret once, with the scopes asked for', async () => {
      await page.getByTestId('key-label').fill('dashboard');
      await page.getByTestId('scope-read').check();
      await page.getByTestId('scope-write').check();
      await page.getByTestId('create-key').click();
      firstSecret = (await page.getByTestId('new-key-secret').textContent()).trim();
      assert(firstSecret.startsWith('egk_live_'), `secret: ${firstSecret}`);
      console.log(`secret dashboard ${firstSecret}`);
      const created = await row(page, 'dashboard');
      const scopes = (await created.getByTestId('key-scopes').textContent()).trim();
      assert(scopes === 'memories:read memories:write', `scopes: ${scopes}`);
      assert((await created.getAttribute('data-state')) === 'active', 'new key is active');
      mkdirSync(artifacts, { recursive: true });
      const file = path.join(artifacts, '11-api-keys.png');
      await page.screenshot({ path: file, fullPage: true });
      console.log(`  screenshot: ${file}`);
    }],
    ['after a reload the secret is nowhere on the page', async () => {
      await page.reload();
      await page.waitForSelector('[data-testid="console-root"][data-hydrated="true"]');
      await row(page, 'dashboard');
      const html = await page.content();
      assert(!html.includes(firstSecret.slice(26)), 'the secret is shown again');
    }],
    ['revoking marks the key revoked', async () => {
      const target = await row(page, 'dashboard');
      // Asked once, naming the key; then reported beside the table.
      await target.getByTestId('revoke-key-ask').click();
      const question = await target.locator('.confirm-question').first().textContent();
      assert(question.includes('dashboard'), `the question names the key: ${question}`);
      await target.getByTestId('revoke-key').click();
      await until('the revoked state', async () => (await (await row(page, 'dashboard')).getAttribute('data-state')) === 'revoked');
      const done = (await page.getByTestId('keys-done').textContent()).trim();
      assert(done.includes('revoked'), `reported: ${done}`);
    }],
    ['a test key with an expiry shows it, with times a person reads', async () => {
      await page.getByTestId('key-label').fill('staging');
      await page.getByTestId('scope-read').check();
      await page.getByTestId('key-environment').selectOption('test');
      await page.getByTestId('key-expires').fill('2031-01-31');
      await page.getByTestId('create-key').click();
      const secret = await until('a test key\'s secret', async () => {
        const text = (await page.getByTestId('new-key-secret').textContent()).trim();
        return text.startsWith('egk_test_') ? text : false;
      });
      assert(secret.startsWith('egk_test_'), `a test key: ${secret.slice(0, 9)}`);
      const target = await row(page, 'staging');
      const cells = await target.locator('td').allTextContents();
      assert(cells.some((cell) => cell.includes('2031-02-01 00:00 UTC')), `the expiry (the day after the last): ${cells}`);
      assert(!cells.some((cell) => /T\d\d:\d\d:\d\d\./.test(cell)), `no raw timestamps: ${cells}`);
    }],
    ['rolling a key shows the new secret', async () => {
      const before = (await page.getByTestId('new-key-secret').textContent()).trim();
      await page.getByTestId('key-label').fill('ingest');
      await page.getByTestId('scope-write').check();
      await page.getByTestId('create-key').click();
      const ingestSecret = await until('the new key\'s secret', async () => {
        const text = (await page.getByTestId('new-key-secret').textContent()).trim();
        return text !== before ? text : false;
      });
      console.log(`secret ingest-original ${ingestSecret}`);
      await until('the form reset after a key is made', async () => (await page.getByTestId('key-label').inputValue()) === '');
      const target = await row(page, 'ingest');
      await target.getByTestId('roll-key-ask').click();
      await target.getByTestId('roll-key').click();
      const rolled = await until('a new secret', async () => {
        const text = (await page.getByTestId('new-key-secret').textContent()).trim();
        return text !== ingestSecret ? text : false;
      });
      console.log(`secret ingest-rolled ${rolled}`);
    }],
    ['a key bound to an agent lists its agent', async () => {
      const before = (await page.getByTestId('new-key-secret').textContent()).trim();
      await page.getByTestId('key-label').fill('support-bot');
      await page.getByTestId('scope-read').check();
      await page.getByTestId('scope-write').check();
      await page.getByTestId('key-agents-input').fill('support');
      await page.getByTestId('create-key').click();
      const secret = await until('the bound key\'s secret', async () => {
        const text = (await page.getByTestId('new-key-secret').textContent()).trim();
        return text !== before ? text : false;
      });
      console.log(`secret support-bot ${secret}`);
      const agents = (await (await row(page, 'support-bot')).getByTestId('key-agents').textContent()).trim();
      assert(agents === 'support', `agents: ${agents}`);
      const unbound = (await (await row(page, 'default')).getByTestId('key-agents').textContent()).trim();
      assert(unbound === 'every agent', `the first key's agents: ${unbound}`);
    }],
    ['the browser reported no errors', async () => {
      assert(browserErrors.length === 0, browserErrors.join('; '));
    }],
  ];
  for (const [name, fn] of steps) {
    if (!(await check(name, fn))) break;
  }
} finally {
  await browser.close();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
