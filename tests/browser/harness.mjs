// What every console browser test shares: the system Chromium, named steps that stop at the
// first failure and print `ok` / `FAIL` lines and an `N passed, N failed` summary, polling,
// hydration and screenshots.

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const artifacts = path.join(here, 'artifacts');
export const base = (process.env.ENGRAM_URL ?? '').replace(/\/+$/, '');
export const timeout = Number(process.env.ENGRAM_BROWSER_TIMEOUT_MS ?? 120000);

export function assert(condition, message) {
  if (!condition) throw new Error(message);
}

/// Polls `probe` until it returns something truthy (and returns that), or fails after `timeout`.
export async function until(what, probe) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const value = await probe().catch(() => false);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export async function hydrated(page) {
  await page.waitForSelector('[data-testid="console-root"][data-hydrated="true"]');
}

export async function screenshot(page, name) {
  mkdirSync(artifacts, { recursive: true });
  const file = path.join(artifacts, name);
  await page.screenshot({ path: file, fullPage: true });
  console.log(`  screenshot: ${file}`);
}

export async function signIn(page, email, password) {
  await page.goto(`${base}/console/login`);
  await hydrated(page);
  await page.getByTestId('login-email').fill(email);
  await page.getByTestId('login-password').fill(password);
  await page.getByTestId('login-submit').click();
  // Each role lands on its own first page (the owner on the memories).
  await page.waitForURL((url) => url.pathname.startsWith('/console/') && url.pathname !== '/console/login');
}

/// Launches Chromium, runs `steps(browser)` — a list of [name, fn] run in order until one
/// fails — prints the summary and exits with the outcome.
export async function runSteps(makeSteps) {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--no-first-run', '--disable-sync', '--disable-quic'],
  });
  let passed = 0;
  let failed = 0;
  try {
    const steps = await makeSteps(browser);
    for (const [name, fn] of steps) {
      const started = Date.now();
      try {
        await fn();
        passed += 1;
        console.log(`ok   - ${name} (${Date.now() - started} ms)`);
      } catch (err) {
        failed += 1;
        console.log(`FAIL - ${name}: ${err && err.message ? err.message : err}`);
        break;
      }
    }
  } finally {
    await browser.close();
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}

/// A page that records uncaught browser errors in `errors`.
export async function newPage(browser, errors, options = {}) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, ...options });
  const page = await context.newPage();
  page.setDefaultTimeout(timeout);
  page.on('pageerror', (err) => errors.push(`pageerror: ${err.message}`));
  return page;
}
