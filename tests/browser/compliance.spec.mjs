// Drives the compliance workflows in the system Chromium (playwright-core), signed in as a
// compliance officer: filter memories and search them by meaning, open one (provenance),
// correct it with a reason (the history shows the diff), put it under legal hold (erasure of
// its subject is refused, naming it), lift the hold, export the subject, erase it and watch
// the erasure finish with a verified receipt, then bulk-delete by filter after a dry-run
// count. Prints `N passed, N failed`; exits non-zero on any failure.
//
// Environment: ENGRAM_URL, ENGRAM_CONSOLE_EMAIL, ENGRAM_CONSOLE_PASSWORD.

import { assert, base, hydrated, newPage, runSteps, screenshot, signIn, until } from './harness.mjs';
import { readFileSync } from 'node:fs';

async function rowContents(page) {
  return page.$$eval('[data-testid="memory-row"]', (rows) =>
    rows.map((row) => row.querySelector('[data-testid="memory-content"]')?.textContent.trim() ?? ''));
}

await runSteps(async (browser) => {
  const browserErrors = [];
  const page = await newPage(browser, browserErrors, { acceptDownloads: true });
  let memoryUrl;
  const steps = [
    ['the compliance officer signs in and filters by user', async () => {
      await signIn(page, process.env.ENGRAM_CONSOLE_EMAIL, process.env.ENGRAM_CONSOLE_PASSWORD);
      await hydrated(page);
      await page.getByTestId('filter-user').fill('olivia');
      await until('two of olivia\'s memories', async () => (await rowContents(page)).length === 2);
      const contents = await rowContents(page);
      assert(contents.every((c) => c.includes('Olivia')), `rows: ${contents}`);
    }],
    ['a search by meaning puts the right memory first', async () => {
      await page.getByTestId('memory-meaning').fill('where does she like to sit on a plane');
      await until('the window seat first', async () => (await rowContents(page))[0]?.includes('window seats'));
      assert(await page.getByTestId('memory-score').first().isVisible(), 'scores are shown');
      // A relevance cut-off leaves out what scores below it.
      const scores = (await page.getByTestId('memory-score').allTextContents()).map(Number);
      const best = Math.max(...scores);
      if (scores.some((score) => score < best)) {
        await page.getByTestId('filter-min_score').fill(String(best - 0.001));
        await until('only the best match', async () => (await page.getByTestId('memory-score').count()) === scores.filter((score) => score >= best - 0.001).length);
        await page.getByTestId('filter-min_score').fill('');
        await until('every match again', async () => (await page.getByTestId('memory-score').count()) === scores.length);
      }
    }],
    ['the memory page shows provenance', async () => {
      await page.getByTestId('memory-link').first().click();
      await page.waitForURL((url) => url.pathname === '/console/memory');
      await hydrated(page);
      memoryUrl = page.url();
      assert((await page.getByTestId('provenance-source').textContent()).trim() === 'user_stated', 'source');
      const creator = (await page.getByTestId('provenance-creator').textContent()).trim();
      assert(creator.startsWith('api_key'), `creator: ${creator}`);
    }],
    ['a reviewer verifies the conclusion, and the page and its history say by whom', async () => {
      const verified = async () => (await page.getByTestId('memory-verified').textContent()).trim();
      assert((await verified()).startsWith('no'), `unverified at first: ${await verified()}`);
      await page.getByTestId('flag-verified-reason').fill('checked against the booking');
      await page.getByTestId('flag-verified-submit').click();
      await until('the memory to be verified', async () => (await verified()).startsWith('yes, by console_account:'));
      const reasons = async () => (await page.getByTestId('history-reason').allTextContents()).join(' | ');
      await until('the verification in the history', async () => (await reasons()).includes('checked against the booking'));
      await page.getByTestId('flag-verified-reason').fill('the booking changed');
      await page.getByTestId('flag-verified-submit').click();
      await until('the verification to be withdrawn', async () => (await verified()).startsWith('no'));
    }],
    ['a correction needs a reason and shows up as a diff in the history', async () => {
      const before = Number((await page.getByTestId('memory-version').textContent()).trim());
      const next = String(before + 1);
      await page.getByTestId('correct-content').fill('Olivia prefers aisle seats on long flights.');
      // Metadata and categories are corrected with the same reason.
      await page.getByTestId('correct-metadata').fill('{"status": "confirmed"}');
      await page.getByTestId('correct-categories').fill('travel, seating');
      await page.getByTestId('correct-reason').fill('customer corrected it on the phone');
      await page.getByTestId('correct-submit').click();
      await until(`version ${next}`, async () => (await page.getByTestId('memory-version').textContent()).trim() === next);
      const latest = page.getByTestId('history-entry').first();
      assert((await latest.getAttribute('data-version')) === next, 'newest first');
      const removed = await latest.getByTestId('diff-removed').allTextContents();
      const added = await latest.getByTestId('diff-added').allTextContents();
      assert(removed.join(' ').includes('window'), `removed: ${removed}`);
      assert(added.join(' ').includes('aisle'), `added: ${added}`);
      assert((await latest.getByTestId('history-reason').textContent()).includes('customer corrected'), 'reason shown');
      // Reported where it was done, the form ready for the next one; the id is on the page.
      await page.getByTestId('correct-done').waitFor();
      const provenance = await page.getByTestId('provenance').textContent();
      assert(provenance.includes('confirmed') && provenance.includes('seating'), `metadata and categories corrected: ${provenance}`);
      assert((await page.getByTestId('correct-reason').inputValue()) === '', 'the reason box is emptied');
      assert(memoryUrl.includes((await page.getByTestId('memory-id').textContent()).trim()), 'the id is shown');
      await screenshot(page, '30-memory-history.png');
    }],
    ['a legal hold locks the memory', async () => {
      await page.getByTestId('flag-legal_hold-reason').fill('litigation hold 2026-17');
      await page.getByTestId('flag-legal_hold-submit').click();
      await page.getByTestId('badge-held').waitFor();
      await page.getByTestId('correct-locked').waitFor();
    }],
    ['a person is found by the start of their id or by a metadata value', async () => {
      await page.goto(`${base}/console/subjects`);
      await hydrated(page);
      await page.getByTestId('subject-user').fill('oli');
      await page.getByTestId('subject-lookup').click();
      const found = async () => page.getByTestId('subject-match')
        .evaluateAll((rows) => rows.map((row) => row.dataset.user));
      await until('olivia and oliver found', async () => (await found()).join() === 'oliver,olivia');
      assert(page.url().includes('user=oli'), `the lookup is in the URL: ${page.url()}`);
      await page.getByTestId('subject-user').fill('');
      await page.getByTestId('subject-metadata').fill('customer=C-2077');
      await page.getByTestId('subject-lookup').click();
      await until('only oliver found', async () => (await found()).join() === 'oliver');
      // A found person's link opens their summary.
      await page.getByTestId('subject-match-link').first().click();
      await until('oliver\'s summary', async () =>
        (await page.getByTestId('subject-summary').getAttribute('data-memories')) === '1');
      assert((await page.getByTestId('subject-user').inputValue()) === 'oliver', 'the field shows who');
    }],
    ['erasing a subject with held memories is refused, naming them', async () => {
      await page.goto(`${base}/console/subjects?user=olivia`);
      await hydrated(page);
      const summary = page.getByTestId('subject-summary');
      await summary.waitFor();
      assert((await summary.getAttribute('data-memories')) === '2', 'two memories');
      // Every store of the registry is listed with what it holds of her.
      const records = async (store) =>
        page.getByTestId(`subject-store-${store}`).getAttribute('data-records');
      assert((await records('memories')) === '2', `memories: ${await records('memories')}`);
      assert(Number(await records('history')) >= 2, `history: ${await records('history')}`);
      for (const store of ['messages', 'session_state', 'files', 'feedback', 'recall_events',
        'evaluation_cases', 'evaluation_runs', 'task_results', 'idempotency', 'index']) {
        assert((await records(store)) !== null, `${store} is listed`);
      }
      await page.getByTestId('subject-held').waitFor();
      await page.getByTestId('erase-confirm').fill('olivia');
      await page.getByTestId('erase-submit').click();
      const error = (await page.getByTestId('erasure-error').textContent()).trim();
      assert(error.includes('legal hold'), `error: ${error}`);
    }],
    ['the hold is lifted and the subject exported', async () => {
      await page.goto(memoryUrl);
      await hydrated(page);
      await page.getByTestId('flag-legal_hold-reason').fill('litigation closed');
      await page.getByTestId('flag-legal_hold-submit').click();
      await until('the hold to go', async () => (await page.getByTestId('badge-held').count()) === 0);
      await page.goto(`${base}/console/subjects?user=olivia`);
      await hydrated(page);
      await page.getByTestId('subject-summary').waitFor();
      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.getByTestId('subject-export').click(),
      ]);
      const text = readFileSync(await download.path(), 'utf8');
      const lines = text.trim().split('\n').map((line) => JSON.parse(line));
      assert(lines.length === 3, `lines: ${text}`);
      assert(lines.slice(0, 2).every((line) => line.memory.user_id === 'olivia'), 'only olivia');
      assert(!text.includes('Paul'), 'no other subject');
      console.log(`  export: ${lines.length - 1} memories`);
    }],
    ['erasure runs with progress and ends with a verified receipt', async () => {
      await page.getByTestId('erase-confirm').fill('olivia');
      await page.getByTestId('erase-submit').click();
      const erasure = page.getByTestId('erasure');
      await until('the erasure to succeed', async () => (await erasure.getAttribute('data-status')) === 'succeeded');
      assert((await erasure.getAttribute('data-verified')) === 'true', 'verified');
      const digest = (await page.getByTestId('erasure-digest').textContent()).trim();
      assert(/^[0-9a-f]{64}$/.test(digest), `digest: ${digest}`);
      const receipt = (await page.getByTestId('erasure-receipt').textContent());
      assert(!receipt.includes('olivia'), 'the receipt names no end-user');
      await until('the summary to show nothing left', async () =>
        (await page.getByTestId('subject-summary').getAttribute('data-memories')) === '0');
      const left = await page.getByTestId('subject-stores').locator('tr[data-records]')
        .evaluateAll((rows) => rows.map((row) => [row.dataset.testid, row.dataset.records]));
      assert(left.length >= 12 && left.every(([, records]) => records === '0'), `left: ${left}`);
      console.log(`  receipt digest: ${digest}`);
      await screenshot(page, '31-erasure-receipt.png');
    }],
    ['the erased person\'s page says when, with the receipt as a table', async () => {
      await page.goto(`${base}/console/subjects?user=olivia`);
      await hydrated(page);
      const erased = page.getByTestId('subject-erased');
      await erased.waitFor();
      const said = (await erased.locator('summary').textContent()).trim();
      assert(/^Erased on \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC with receipt [0-9a-f]{64}$/.test(said), `erased: ${said}`);
      await erased.locator('summary').click();
      const table = await erased.getByTestId('subject-erased-receipt').innerText();
      assert(table.includes('removed.memories') && !table.includes('olivia'), `receipt: ${table.slice(0, 200)}`);
      await screenshot(page, '31c-erased-subject.png');
    }],
    ['nothing of olivia is left in the memories list', async () => {
      await page.goto(`${base}/console/memories?user=olivia`);
      await hydrated(page);
      await page.getByTestId('memories-empty').waitFor();
    }],
    ['deleting one memory needs a reason and a confirmation', async () => {
      await page.goto(`${base}/console/memories?user=rita`);
      await hydrated(page);
      await until('rita\'s memory', async () => (await rowContents(page)).length === 1);
      await page.getByTestId('memory-link').first().click();
      await page.waitForURL((url) => url.pathname === '/console/memory');
      await hydrated(page);
      await page.getByTestId('delete-reason').fill('temporary access expired');
      await page.getByTestId('delete-submit').click();
      // The refusal shows beside the button that was pressed.
      const error = (await page.getByTestId('delete-error').textContent()).trim();
      assert(error.includes('confirm'), `error: ${error}`);
      assert((await page.getByTestId('delete-form').getByTestId('delete-error').count()) === 1, 'the error is in the delete form');
      await page.getByTestId('delete-confirm').check();
      await page.getByTestId('delete-submit').click();
      await page.waitForURL((url) => url.pathname === '/console/memories');
      await hydrated(page);
      await page.getByTestId('memory-deleted').waitFor();
    }],
    ['paul is erased from every project of the organization at once', async () => {
      await page.goto(`${base}/console/subjects?user=paul`);
      await hydrated(page);
      await page.getByTestId('subject-summary').waitFor();
      await page.getByTestId('erase-everywhere-confirm').fill('paul');
      await page.getByTestId('erase-everywhere-submit').click();
      const erasure = page.getByTestId('erasure');
      await until('the organization-wide erasure to succeed', async () =>
        (await erasure.getAttribute('data-status')) === 'succeeded');
      assert((await erasure.getAttribute('data-organization-wide')) === 'true', 'organization-wide');
      assert((await erasure.getAttribute('data-verified')) === 'true', 'verified');
      // The receipt reads as a table; the signed JSON stays one click away.
      const table = await page.getByTestId('erasure-receipt-table').innerText();
      assert(table.includes('removed.memories') && !table.includes('{'), `receipt table: ${table.slice(0, 200)}`);
      const receipt = JSON.parse(await page.getByTestId('erasure-receipt').textContent());
      assert(receipt.projects.length === 2, `projects: ${receipt.projects.length}`);
      assert(receipt.removed.memories === 2, `removed: ${JSON.stringify(receipt.removed)}`);
      assert(!JSON.stringify(receipt).includes('paul'), 'the receipt names no end-user');
      await screenshot(page, '31b-organization-erasure.png');
    }],
    ['bulk delete counts first, then deletes what the filter matches', async () => {
      await page.goto(`${base}/console/memories?category=offsite`);
      await hydrated(page);
      await until('three offsite notes', async () => (await rowContents(page)).length === 3);
      await page.getByTestId('bulk-preview').click();
      const count = page.getByTestId('bulk-count');
      await count.waitFor();
      assert((await count.getAttribute('data-matching')) === '3', 'three match');
      await page.getByTestId('bulk-expected').fill('3');
      await page.getByTestId('bulk-reason').fill('offsite planning is over');
      await page.getByTestId('bulk-confirm').click();
      const outcome = page.getByTestId('bulk-outcome');
      await outcome.waitFor();
      assert((await outcome.getAttribute('data-deleted')) === '3', 'three deleted');
      await page.getByTestId('memories-empty').waitFor();
      await screenshot(page, '32-bulk-delete.png');
    }],
    ['the browser reported no errors', async () => {
      assert(browserErrors.length === 0, browserErrors.join('; '));
    }],
  ];
  return steps;
});
