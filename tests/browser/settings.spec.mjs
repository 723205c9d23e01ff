// Drives the console's data-governance settings in the system Chromium (playwright-core):
// the retention dry run names the expired memory, PII masking and an episodic retention are
// saved (and still there after a reload), and "Run the sweep now" removes exactly what the
// dry run named. Prints `N passed, N failed`; exits non-zero on any failure.
//
// Environment: ENGRAM_URL, ENGRAM_CONSOLE_EMAIL, ENGRAM_CONSOLE_PASSWORD.

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const artifacts = path.join(here, 'artifacts');
const base = process.env.ENGRAM_URL.replace(/\/+$/, '');
const timeout = Number(process.env.ENGRAM_BROWSER_TIMEOUT_MS ?? 15000);

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
async function until(what, probe) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const value = await probe().catch(() => false);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
async function hydrated(page) {
  await page.waitForSelector('[data-testid="console-root"][data-hydrated="true"]');
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--no-first-run', '--disable-sync', '--disable-quic'],
});
try {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  page.setDefaultTimeout(timeout);
  const browserErrors = [];
  page.on('pageerror', (err) => browserErrors.push(`pageerror: ${err.message}`));
  const preview = () => page.getByTestId('retention-preview');
  const steps = [
    ['the dry run names the expired memory', async () => {
      await page.goto(`${base}/console/login`);
      await hydrated(page);
      await page.getByTestId('login-email').fill(process.env.ENGRAM_CONSOLE_EMAIL);
      await page.getByTestId('login-password').fill(process.env.ENGRAM_CONSOLE_PASSWORD);
      await page.getByTestId('login-submit').click();
      await page.waitForURL((url) => url.pathname === '/console/memories');
      await page.getByTestId('nav-settings').click();
      await page.waitForURL((url) => url.pathname === '/console/settings');
      await hydrated(page);
      await preview().waitFor();
      assert((await preview().getAttribute('data-would-delete')) === '1', 'one memory is due');
    }],
    ['PII masking and an episodic retention are saved', async () => {
      await page.getByTestId('settings-pii').selectOption('mask');
      await page.getByTestId('settings-retention-episodic').fill('30');
      await page.getByTestId('settings-save').click();
      await page.getByTestId('settings-saved').waitFor();
      await page.reload();
      await hydrated(page);
      assert((await page.getByTestId('settings-pii').inputValue()) === 'mask', 'mask kept');
      assert((await page.getByTestId('settings-retention-episodic').inputValue()) === '30', '30 days kept');
      mkdirSync(artifacts, { recursive: true });
      const file = path.join(artifacts, '40-settings.png');
      await page.screenshot({ path: file, fullPage: true });
      console.log(`  screenshot: ${file}`);
    }],
    ['the sweep removes what the dry run named', async () => {
      await page.getByTestId('sweep-now').click();
      const result = page.getByTestId('sweep-result');
      await result.waitFor();
      assert((await result.getAttribute('data-removed')) === '1', 'one removed');
      await until('an empty dry run', async () => (await preview().getAttribute('data-would-delete')) === '0');
    }],
    ['the memories page no longer lists it', async () => {
      await page.goto(`${base}/console/memories?user=sam`);
      await hydrated(page);
      const contents = await until('sam\'s remaining memory', async () => {
        const shown = await page.$$eval('[data-testid="memory-content"]', (cells) => cells.map((c) => c.textContent.trim()));
        return shown.length === 1 ? shown : false;
      });
      assert(contents[0].includes('jazz'), `left: ${contents}`);
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
