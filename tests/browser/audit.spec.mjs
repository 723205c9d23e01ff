// Drives the console's audit log page in the system Chromium (playwright-core): after a
// login (one wrong password first), the page shows the verified hash chain, the project's
// events and the organization's console logins, filters by action after hydration, and
// exports CSV. Prints `N passed, N failed`; exits non-zero on any failure.
//
// Environment:
//   ENGRAM_URL, ENGRAM_CONSOLE_EMAIL, ENGRAM_CONSOLE_PASSWORD   as for console.spec.mjs
//   ENGRAM_EXPECT_ACTIONS   JSON array of actions that must be listed
//   ENGRAM_FORBIDDEN_TEXT   JSON array of strings (memory content) that must never be shown

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const artifacts = path.join(here, 'artifacts');
const base = process.env.ENGRAM_URL.replace(/\/+$/, '');
const email = process.env.ENGRAM_CONSOLE_EMAIL;
const password = process.env.ENGRAM_CONSOLE_PASSWORD;
const expectedActions = JSON.parse(process.env.ENGRAM_EXPECT_ACTIONS);
const forbidden = JSON.parse(process.env.ENGRAM_FORBIDDEN_TEXT ?? '[]');
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
async function until(what, probe) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    last = await probe().catch((err) => `error: ${err.message}`);
    if (last && !(typeof last === 'string' && last.startsWith('error:'))) return last;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last seen: ${JSON.stringify(last)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
async function actionsShown(page) {
  return page.locator('[data-testid="audit-row"]').evaluateAll((rows) => rows.map((row) => row.dataset.action));
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--no-first-run', '--disable-sync', '--disable-quic'],
});
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, acceptDownloads: true });
  const page = await context.newPage();
  page.setDefaultTimeout(timeout);
  const browserErrors = [];
  page.on('pageerror', (err) => browserErrors.push(`pageerror: ${err.message}`));
  const steps = [
    ['a wrong password, then the right one', async () => {
      await page.goto(`${base}/console/login`);
      await page.waitForSelector('[data-testid="console-root"][data-hydrated="true"]');
      await page.getByTestId('login-email').fill(email);
      await page.getByTestId('login-password').fill(`${password}-wrong`);
      await page.getByTestId('login-submit').click();
      await page.getByTestId('login-error').waitFor({ state: 'visible' });
      await page.getByTestId('login-password').fill(password);
      await page.getByTestId('login-submit').click();
      await page.waitForURL((url) => url.pathname === '/console/memories');
    }],
    ['the memories page links to the audit log', async () => {
      await page.getByTestId('nav-audit').click();
      await page.waitForURL((url) => url.pathname === '/console/audit');
      await page.waitForSelector('[data-testid="console-root"][data-hydrated="true"]');
    }],
    ['the hash chain is verified', async () => {
      const status = page.getByTestId('audit-verification');
      await status.waitFor();
      assert((await status.getAttribute('data-verified')) === 'true', await status.textContent());
      assert(/verified/i.test(await status.textContent()), await status.textContent());
    }],
    ['every expected action is listed, logins and views included, and no content', async () => {
      const shown = await until('the expected actions', async () => {
        const actions = await actionsShown(page);
        return expectedActions.every((action) => actions.includes(action)) ? actions : false;
      });
      const text = await page.locator('body').innerText();
      for (const content of forbidden) assert(!text.includes(content), `memory content shown: ${content}`);
      mkdirSync(artifacts, { recursive: true });
      const file = path.join(artifacts, '10-audit-log.png');
      await page.screenshot({ path: file, fullPage: true });
      console.log(`  screenshot: ${file}`);
    }],
    ['actors are named, reasons shown, and page views folded into one line', async () => {
      const names = await page.getByTestId('audit-actor-name').allTextContents();
      assert(names.some((name) => name.includes(email.toLowerCase())), `a member is named by e-mail: ${names.slice(0, 5)}`);
      assert(names.some((name) => name.includes('key “')), `a key is named by its label: ${names.slice(0, 5)}`);
      assert(!names.some((name) => /[0-9a-f]{8}-[0-9a-f]{4}-/.test(name) && name.includes('console_account')), 'no member shown as a bare id');
      const updated = page.locator('[data-testid="audit-row"][data-action="memory.updated"]').first();
      assert((await updated.getByTestId('audit-reason').textContent()).includes('history'), 'the correction says where its reason is');
      // Targets that have a name show it (the id on hover).
      const created = page.locator('[data-testid="audit-row"][data-action="api_key.created"]').first();
      const target = created.getByTestId('audit-target-name').first();
      assert((await target.textContent()).includes('key “ci”'), `the new key is named: ${await created.innerText()}`);
      assert(/^[0-9a-f-]{36}$/.test(await target.getAttribute('title')), 'its id on hover');
      const views = await page.locator('[data-testid="audit-row"][data-action="memory.content_viewed"]').count();
      assert(views >= 1, 'content views are listed');
    }],
    ['the log pages through everything, and the URL keeps the filter and the page', async () => {
      await page.getByTestId('action-select').selectOption('memory.created');
      // The unfiltered newest page is full too, and stays on screen until the filtered one
      // arrives: wait for a full page of writes only.
      const onlyWrites = (shown) => shown.length === 100 && shown.every((action) => action === 'memory.created');
      await until('a full page of writes', async () => onlyWrites(await actionsShown(page)));
      await page.getByTestId('audit-older').click();
      const older = await until('the older writes', async () => {
        const shown = await actionsShown(page);
        return shown.length > 0 && shown.length < 100 ? shown : false;
      });
      assert(older.every((action) => action === 'memory.created'), `older page: ${older}`);
      // The page is drawn before the address bar is rewritten: wait for both.
      await until(`the URL to keep the filter and the page (now ${page.url()})`,
        async () => page.url().includes('action=memory.created') && page.url().includes('before='));
      await page.reload();
      await page.waitForSelector('[data-testid="console-root"][data-hydrated="true"]');
      const reloaded = await until('the same page after a reload', async () => {
        const shown = await actionsShown(page);
        return shown.length === older.length ? shown : false;
      });
      assert(reloaded.length === older.length, 'the reload shows the same page');
      await page.getByTestId('audit-newest').click();
      await until('the newest page of writes again', async () => onlyWrites(await actionsShown(page)));
    }],
    ['filtering by actor (an e-mail) leaves only that member', async () => {
      await page.getByTestId('action-select').selectOption('');
      await page.getByTestId('audit-actor').fill(email);
      await page.getByTestId('audit-apply').click();
      const names = await until('only the member', async () => {
        const shown = await page.getByTestId('audit-actor-name').allTextContents();
        return shown.length > 0 && shown.every((name) => name.includes(email.toLowerCase())) ? shown : false;
      });
      assert(names.length >= 1, 'the member acted');
      await page.getByTestId('audit-actor').fill('');
      await page.getByTestId('audit-apply').click();
    }],
    ['filtering by action leaves only that action', async () => {
      await page.getByTestId('action-select').selectOption('console.login_failed');
      const actions = await until('only failed logins', async () => {
        const shown = await actionsShown(page);
        return shown.length > 0 && shown.every((action) => action === 'console.login_failed') ? shown : false;
      });
      assert(actions.length >= 1, 'the wrong password is on record');
    }],
    ['the CSV export follows the filter', async () => {
      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.getByTestId('audit-export').click(),
      ]);
      const file = path.join(artifacts, 'audit-export.csv');
      await download.saveAs(file);
      const { readFileSync } = await import('node:fs');
      const lines = readFileSync(file, 'utf8').trim().split('\n');
      assert(lines[0].startsWith('id,sequence,at,actor_type'), `header: ${lines[0]}`);
      assert(lines.length > 1, 'the filtered events are exported');
      for (const line of lines.slice(1)) {
        assert(line.includes(',console.login_failed,'), `an event outside the filter: ${line}`);
      }
      for (const content of forbidden) assert(!lines.join('\n').includes(content), `content in CSV: ${content}`);
      console.log(`  csv: ${lines.length - 1} events`);
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
