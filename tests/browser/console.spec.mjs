// Drives the Engram admin console in the system Chromium (playwright-core, no test framework):
// login (wrong then right password), memories list, filters after hydration, logout, and the
// same journey without JavaScript. Prints `N passed, N failed`; exits non-zero on any failure.
//
// Environment:
//   ENGRAM_URL                 base URL of the server (the console lives at <base>/console)
//   ENGRAM_CONSOLE_EMAIL       console account e-mail
//   ENGRAM_CONSOLE_PASSWORD    its password
//   ENGRAM_EXPECT_CONTENTS     JSON array of memory contents present in the first project
//   ENGRAM_FORBIDDEN_CONTENTS  optional JSON array of contents that must never be shown
//   ENGRAM_BROWSER_TIMEOUT_MS  optional wait limit per step (default 120000: a deadline for a busy machine, reached only when a step is broken)
//
// Screenshots go to tests/browser/artifacts/ (gitignored); their paths are printed.

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const artifacts = path.join(here, 'artifacts');

function env(name, fallback) {
  const value = process.env[name] ?? fallback;
  if (value === undefined || value === '') {
    console.error(`missing environment variable ${name}`);
    process.exit(2);
  }
  return value;
}

function jsonArray(name, fallback) {
  const raw = env(name, fallback);
  let value;
  try {
    value = JSON.parse(raw);
  } catch (err) {
    console.error(`${name} is not JSON: ${err.message}`);
    process.exit(2);
  }
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) {
    console.error(`${name} must be a JSON array of strings`);
    process.exit(2);
  }
  return value;
}

const base = env('ENGRAM_URL').replace(/\/+$/, '');
const email = env('ENGRAM_CONSOLE_EMAIL');
const password = env('ENGRAM_CONSOLE_PASSWORD');
const expected = jsonArray('ENGRAM_EXPECT_CONTENTS');
const forbidden = jsonArray('ENGRAM_FORBIDDEN_CONTENTS', '[]');
const expectedTotal = Number(env('ENGRAM_EXPECT_TOTAL'));
const timeout = Number(process.env.ENGRAM_BROWSER_TIMEOUT_MS ?? 120000);
if (expected.length === 0) {
  console.error('ENGRAM_EXPECT_CONTENTS must name at least one memory');
  process.exit(2);
}

const LOGIN = `${base}/console/login`;
const MEMORIES = `${base}/console/memories`;
const KINDS = ['semantic', 'episodic', 'procedural', 'preference'];

// ---------------------------------------------------------------------------------------
// Tiny harness: named checks, each printed as it ends; a failed check ends its journey,
// since later steps depend on the page state it was meant to reach.

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

async function journey(title, steps) {
  console.log(`# ${title}`);
  for (const [name, fn] of steps) {
    if (!(await check(name, fn))) {
      console.log(`# ${title}: stopped after the failure above`);
      return;
    }
  }
}

/** Polls `probe` until it returns a truthy value; the error names `what` and the last value. */
async function until(what, probe, limit = timeout) {
  const deadline = Date.now() + limit;
  let last;
  for (;;) {
    try {
      last = await probe();
      if (last) return last;
    } catch (err) {
      last = `error: ${err.message}`;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}; last seen: ${JSON.stringify(last)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function assert(condition, message) {
  if (!condition) throw new Error(message);
}

async function screenshot(page, name) {
  mkdirSync(artifacts, { recursive: true });
  const file = path.join(artifacts, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  console.log(`  screenshot: ${file}`);
}

/** The rows of the memories table as `{content, kind, user}`. */
async function rows(page) {
  return page.locator('[data-testid="memory-row"]').evaluateAll((trs) =>
    trs.map((tr) => ({
      content: tr.querySelector('[data-testid="memory-content"]')?.textContent.trim() ?? '',
      kind: tr.dataset.kind ?? '',
      user: tr.querySelector('[data-testid="memory-user"]')?.textContent.trim() ?? '',
    })),
  );
}

const contents = (list) => list.map((r) => r.content);
const pathOf = (page) => new URL(page.url()).pathname;

async function waitForHydration(page) {
  await page.waitForSelector('[data-testid="console-root"][data-hydrated="true"]', { timeout });
}

async function allExpectedVisible(page) {
  return until('every expected memory in the table', async () => {
    const shown = contents(await rows(page));
    const missing = expected.filter((c) => !shown.includes(c));
    return missing.length === 0 ? shown : false;
  });
}

function assertNothingForbidden(shownText) {
  for (const content of forbidden) {
    assert(!shownText.includes(content), `a memory that must not be shown is visible: ${content}`);
  }
}

// An expected memory that a filter on its full content selects alone (no other expected
// content contains it).
const target = expected.find(
  (c) => !expected.some((other) => other !== c && other.toLowerCase().includes(c.toLowerCase())),
);

// ---------------------------------------------------------------------------------------

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-background-networking',
    '--disable-component-update',
    '--no-first-run',
    '--disable-sync',
    '--disable-quic',
  ],
});

try {
  // --- with JavaScript: SSR, hydration, interactive filters -----------------------------
  {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const page = await context.newPage();
    page.setDefaultTimeout(timeout);
    // A panic in the wasm (e.g. a hydration mismatch) shows up as a console error.
    const browserErrors = [];
    page.on('pageerror', (err) => browserErrors.push(`pageerror: ${err.message}`));
    page.on('console', (msg) => {
      // HTTP error statuses (a 401 for the wrong password) are logged as "Failed to load
      // resource"; they are expected answers, not faults of the page.
      if (msg.type() === 'error' && !msg.text().startsWith('Failed to load resource')) {
        browserErrors.push(`console: ${msg.text()}`);
      }
    });
    let targetKind;

    await journey('console with JavaScript', [
      ['a visit without a session lands on the login page', async () => {
        await page.goto(MEMORIES);
        assert(pathOf(page) === '/console/login', `expected /console/login, got ${page.url()}`);
        await page.getByTestId('login-email').waitFor();
      }],
      ['the login page hydrates', async () => {
        await waitForHydration(page);
      }],
      ['a wrong password shows an error and keeps the visitor out', async () => {
        await page.getByTestId('login-email').fill(email);
        await page.getByTestId('login-password').fill(`${password}-wrong`);
        await page.getByTestId('login-submit').click();
        const error = page.getByTestId('login-error');
        await error.waitFor({ state: 'visible' });
        const text = (await error.textContent()).trim();
        assert(/wrong e-mail or password/i.test(text), `unexpected error text: ${text}`);
        assert(pathOf(page) === '/console/login', `left the login page: ${page.url()}`);
        await screenshot(page, '01-login-error');
      }],
      ['the right password lands on the memories page', async () => {
        await page.getByTestId('login-password').fill(password);
        await page.getByTestId('login-submit').click();
        await page.waitForURL((url) => url.pathname === '/console/memories');
        const account = (await page.getByTestId('account-email').textContent()).trim();
        assert(account === email, `header shows ${account}, expected ${email}`);
      }],
      ['every expected memory is listed', async () => {
        await allExpectedVisible(page);
        assertNothingForbidden(await page.locator('body').innerText());
        await screenshot(page, '02-memories');
      }],
      ['the memories page renders on the server and hydrates after a reload', async () => {
        const response = await page.reload();
        assert(response.status() === 200, `reload answered ${response.status()}`);
        const html = await response.text();
        for (const content of expected) {
          // The server-rendered HTML (before any wasm runs) already carries the rows.
          const escaped = content.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
          assert(html.includes(escaped), `server-rendered page lacks: ${content}`);
        }
        await waitForHydration(page);
        await allExpectedVisible(page);
      }],
      ['the list pages through every memory, and back', async () => {
        const seen = [];
        let pageNumber = 1;
        for (;;) {
          const pager = page.getByTestId('memories-pager');
          await until(`page ${pageNumber} shown`, async () =>
            (await pager.getAttribute('data-page')) === String(pageNumber));
          const shown = contents(await rows(page));
          assert(shown.length > 0, `page ${pageNumber} is empty`);
          seen.push(...shown);
          const next = page.getByTestId('memories-next');
          if (await next.isDisabled()) break;
          await next.click();
          pageNumber += 1;
          assert(pageNumber <= 10, 'the pager never ends');
        }
        await screenshot(page, '02b-last-page');
        assert(pageNumber > 1, 'every memory fit on one page: nothing was paged');
        assert(new Set(seen).size === seen.length, `a memory was shown on two pages: ${seen}`);
        assert(seen.length === expectedTotal, `paged through ${seen.length} memories, expected ${expectedTotal}`);
        const summary = (await page.getByTestId('memories-count').textContent()).trim();
        assert(/the last/.test(summary), `the last page does not say so: ${summary}`);
        // The total is counted, not guessed from the pages.
        assert((await page.getByTestId('memories-count').getAttribute('data-total')) === String(expectedTotal),
          `total: ${await page.getByTestId('memories-count').getAttribute('data-total')}`);
        assert(summary.includes(`of ${expectedTotal} memories`), `the summary names the total: ${summary}`);
        await page.getByTestId('memories-previous').click();
        await until('the previous page', async () =>
          (await page.getByTestId('memories-pager').getAttribute('data-page')) === String(pageNumber - 1));
        // A filter starts again from the first page.
        await page.getByTestId('memory-filter').fill('Older note');
        await until('page 1 of the filtered list', async () =>
          (await page.getByTestId('memories-pager').getAttribute('data-page')) === '1');
        await page.getByTestId('memory-filter').fill('');
        await allExpectedVisible(page);
      }],
      ['the URL keeps the filter and the page: a reload shows the same', async () => {
        await page.getByTestId('memories-next').click();
        await until('page 2 in the URL', async () => page.url().includes('pages='));
        await page.reload();
        await waitForHydration(page);
        await until('page 2 after a reload', async () =>
          (await page.getByTestId('memories-pager').getAttribute('data-page')) === '2');
        await page.getByTestId('memory-filter').fill('Older note');
        await until('the filter in the URL', async () => page.url().includes('q=Older%20note'));
        await page.reload();
        await waitForHydration(page);
        assert((await page.getByTestId('memory-filter').inputValue()) === 'Older note', 'the filter survives a reload');
        await page.goto(page.url().split('?')[0]);
        await waitForHydration(page);
        await allExpectedVisible(page);
        // Without a filter, bulk delete is not offered.
        await page.getByTestId('bulk-needs-filter').waitFor();
        assert((await page.getByTestId('bulk-preview').count()) === 0, 'bulk delete offered with no filter');
      }],
      ['typing a filter leaves only the matching memory', async () => {
        assert(target, 'every expected content is contained in another; cannot pick a unique filter');
        await page.getByTestId('memory-filter').fill(target);
        const only = await until(`only "${target}" listed`, async () => {
          const shown = await rows(page);
          return shown.length === 1 && shown[0].content === target ? shown : false;
        });
        targetKind = only[0].kind;
        assert(KINDS.includes(targetKind), `row has unexpected kind ${targetKind}`);
        await screenshot(page, '03-filtered');
      }],
      ['the kind select narrows the list to that kind', async () => {
        await page.getByTestId('memory-filter').fill('');
        await allExpectedVisible(page);
        await page.getByTestId('kind-select').selectOption(targetKind);
        await until(`only ${targetKind} memories listed`, async () => {
          const shown = await rows(page);
          return (
            shown.length > 0 &&
            shown.every((r) => r.kind === targetKind) &&
            shown.some((r) => r.content === target)
          );
        });
        const other = KINDS.find((k) => k !== targetKind);
        await page.getByTestId('kind-select').selectOption(other);
        await until(`only ${other} memories listed`, async () => {
          const shown = await rows(page);
          return shown.every((r) => r.kind === other) && !contents(shown).includes(target);
        });
        await screenshot(page, '04-kind-filter');
        await page.getByTestId('kind-select').selectOption('');
        await allExpectedVisible(page);
      }],
      ['event time and metadata filters leave only the memory they name', async () => {
        const dated = process.env.ENGRAM_DATED_CONTENT;
        assert(dated, 'ENGRAM_DATED_CONTENT is not set');
        const onlyDated = async () => {
          const shown = contents(await rows(page));
          return shown.length === 1 && shown[0] === dated;
        };
        await page.getByTestId('filter-metadata').fill('trip=lisbon');
        await until('only the memory with metadata trip=lisbon', onlyDated);
        await page.getByTestId('filter-metadata').fill('');
        await allExpectedVisible(page);
        await page.getByTestId('filter-happened_from').fill('2026-05-31');
        await page.getByTestId('filter-happened_to').fill('2026-06-01');
        await until('only the memory that happened on 2026-06-01', onlyDated);
        await screenshot(page, '04b-event-time-filter');
        await page.getByTestId('filter-happened_from').fill('');
        await page.getByTestId('filter-happened_to').fill('');
        await allExpectedVisible(page);
      }],
      ['the project selector switches between projects', async () => {
        const options = await page
          .getByTestId('project-select')
          .locator('option')
          .evaluateAll((os) => os.map((o) => ({ value: o.value, selected: o.selected })));
        assert(options.length > 0 && options[0].selected, 'the first project is not the default');
        if (options.length === 1) {
          console.log('  (only one project: nothing to switch to)');
          return;
        }
        await page.getByTestId('project-select').selectOption(options[1].value);
        await until('the first project\'s memories to disappear', async () => {
          const shown = contents(await rows(page));
          return !expected.some((c) => shown.includes(c));
        });
        await page.getByTestId('project-select').selectOption(options[0].value);
        await allExpectedVisible(page);
      }],
      ['the browser reported no errors', async () => {
        assert(browserErrors.length === 0, browserErrors.join('\n'));
      }],
      ['logout returns to the login page and ends the session', async () => {
        await page.getByTestId('logout-button').click();
        await page.waitForURL((url) => url.pathname === '/console/login');
        await page.getByTestId('login-email').waitFor();
        await screenshot(page, '05-logged-out');
        await page.goto(MEMORIES);
        assert(pathOf(page) === '/console/login', `still signed in after logout: ${page.url()}`);
      }],
    ]);
    await context.close();
  }

  // --- without JavaScript: plain forms must still work ----------------------------------
  {
    const context = await browser.newContext({
      javaScriptEnabled: false,
      viewport: { width: 1280, height: 860 },
    });
    const page = await context.newPage();
    page.setDefaultTimeout(timeout);

    await journey('console without JavaScript', [
      ['a wrong password shows an error', async () => {
        await page.goto(LOGIN);
        await page.getByTestId('login-email').fill(email);
        await page.getByTestId('login-password').fill(`${password}-wrong`);
        await Promise.all([page.waitForLoadState('load'), page.getByTestId('login-submit').click()]);
        await page.getByTestId('login-error').waitFor({ state: 'visible' });
        assert(pathOf(page) === '/console/login', `left the login page: ${page.url()}`);
      }],
      ['the right password lists the memories', async () => {
        await page.getByTestId('login-email').fill(email);
        await page.getByTestId('login-password').fill(password);
        await page.getByTestId('login-submit').click();
        await page.waitForURL((url) => url.pathname === '/console/memories');
        await allExpectedVisible(page);
        assertNothingForbidden(await page.locator('body').innerText());
      }],
      ['the filter form works as a plain GET form', async () => {
        await page.getByTestId('memory-filter').fill(target);
        await Promise.all([
          page.waitForURL((url) => url.searchParams.get('q') === target),
          page.getByTestId('memory-filter').press('Enter'),
        ]);
        const shown = await rows(page);
        assert(
          shown.length === 1 && shown[0].content === target,
          `expected only "${target}", got ${JSON.stringify(contents(shown))}`,
        );
        await screenshot(page, '06-no-js-filtered');
      }],
      ['logout works as a plain form', async () => {
        await page.getByTestId('logout-button').click();
        await page.waitForURL((url) => url.pathname === '/console/login');
        await page.goto(MEMORIES);
        assert(pathOf(page) === '/console/login', `still signed in after logout: ${page.url()}`);
      }],
    ]);
    await context.close();
  }
} finally {
  await browser.close();
}

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
