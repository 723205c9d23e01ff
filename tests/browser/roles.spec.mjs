// Each console role in the system Chromium (playwright-core): the member signs in, lands on a
// page of their own role (compliance on Memories, analysts on Recall, developers on API
// keys), and walks every page the menu offers; no page reached from the menu is refused, no
// request the console makes fails, and the browser logs no error. The menu offers only what
// the role may use. Prints `N passed, N failed`; exits non-zero on any failure.
//
// Environment: ENGRAM_URL, ENGRAM_ROLE_ACCOUNTS (JSON: [{role, email, password}]).

import { assert, base, hydrated, newPage, runSteps, screenshot, signIn } from './harness.mjs';

const accounts = JSON.parse(process.env.ENGRAM_ROLE_ACCOUNTS);

// What each role must (and must not) be offered, from the roles' descriptions: the rest of
// the menu follows the permission table.
const expectations = {
  owner: { landing: '/console/memories', offered: ['nav-memories', 'nav-audit', 'nav-members', 'nav-keys', 'nav-usage'], hidden: [] },
  admin: { landing: '/console/memories', offered: ['nav-memories', 'nav-audit', 'nav-members', 'nav-keys'], hidden: [] },
  compliance: { landing: '/console/memories', offered: ['nav-memories', 'nav-subjects', 'nav-audit'], hidden: ['nav-members', 'nav-keys'] },
  analyst: { landing: '/console/recall', offered: ['nav-recall', 'nav-usage'], hidden: ['nav-memories', 'nav-subjects', 'nav-audit', 'nav-members', 'nav-keys', 'nav-recalls'] },
  developer: { landing: '/console/keys', offered: ['nav-keys'], hidden: ['nav-memories', 'nav-subjects', 'nav-audit', 'nav-members'] },
};

await runSteps(async (browser) => {
  const steps = [];
  for (const account of accounts) {
    const expected = expectations[account.role];
    steps.push([`the ${account.role} lands on ${expected.landing} and every page of the menu works`, async () => {
      const errors = [];
      const failed = [];
      const page = await newPage(browser, errors);
      page.on('console', (message) => {
        if (message.type() === 'error') errors.push(`console: ${message.text()}`);
      });
      page.on('response', (response) => {
        if (response.url().startsWith(base) && response.status() >= 400) {
          failed.push(`${response.status()} ${response.request().method()} ${response.url()}`);
        }
      });
      await signIn(page, account.email, account.password);
      await page.waitForURL((url) => url.pathname === expected.landing);
      await hydrated(page);
      // The menu comes with the session (after a client-side landing, a moment later).
      await page.locator('[data-testid="nav"] a').first().waitFor();
      const offered = await page.locator('[data-testid="nav"] a').evaluateAll(
        (links) => links.map((link) => [link.getAttribute('data-testid'), link.getAttribute('href')]));
      const ids = offered.map(([id]) => id);
      for (const id of expected.offered) assert(ids.includes(id), `${account.role} is offered ${id}: ${ids}`);
      for (const id of expected.hidden) assert(!ids.includes(id), `${account.role} is not offered ${id}: ${ids}`);
      await screenshot(page, `60-landing-${account.role}.png`);
      for (const [id, href] of offered) {
        const response = await page.goto(`${base}${href}`);
        assert(response.status() < 400, `${account.role}: ${href} answered ${response.status()}`);
        await hydrated(page);
        const refusals = await page.locator('[role="alert"]').allTextContents();
        assert(refusals.length === 0, `${account.role}: ${href} (${id}) shows ${refusals.join(' | ')}`);
        // No internal type names reach a person (Rust debug formatting).
        const text = await page.locator('body').innerText();
        const leaked = text.match(/\b(Some|None|Ok|Err|ExternalId|MemoryId|ProjectId|ApiKeyId)\(|\b[A-Z][a-z]+[A-Z]\w*\s\{\s/);
        assert(!leaked, `${account.role}: ${href} shows internal names: ${leaked && leaked[0]}`);
        const current = await page.locator('[data-testid="nav"] a[aria-current="page"]').count();
        assert(current <= 1, `${account.role}: ${href} marks ${current} pages current`);
      }
      assert(failed.length === 0, `${account.role}: failed requests: ${failed.join(', ')}`);
      assert(errors.length === 0, `${account.role}: browser errors: ${errors.join(' | ')}`);
      await page.context().close();
    }]);
  }
  return steps;
});
