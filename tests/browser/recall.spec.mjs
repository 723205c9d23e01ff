// Drives the recall-quality page in the system Chromium (playwright-core): today's searches,
// latency percentiles, empty-recall rate and best scores are drawn; a query that found
// nothing drills down to its recall event; a recall with results lists them with scores; the
// evaluation history marks the regression and shows the comparison of two profiles; a set
// created in the console (cases as JSONL) runs on request, and a bad line is refused; the date range picker narrows the window; an
// analyst sees the figures but not the query texts. Prints `N passed, N failed`; exits
// non-zero on any failure.
//
// Environment: ENGRAM_URL, ENGRAM_CONSOLE_EMAIL, ENGRAM_CONSOLE_PASSWORD, ANALYST_EMAIL,
// ANALYST_PASSWORD, PROJECT_ID, EXPECTED_SEARCHES, EXPECTED_EMPTY, EMPTY_QUERY (the query
// that found nothing most often), FOUND_RECALL_ID and FOUND_CONTENT (a recall with one
// result), EVAL_SET (its name: two runs, the second a regression).

import { assert, base, hydrated, newPage, runSteps, screenshot, signIn, until } from './harness.mjs';

const bars = (page, chart) => page.locator(`[data-testid="${chart}"] rect.bar`);
const project = process.env.PROJECT_ID;

await runSteps(async (browser) => {
  const browserErrors = [];
  const owner = await newPage(browser, browserErrors);
  const steps = [
    ['the recall page charts volume, latency, empty rate and best scores', async () => {
      await signIn(owner, process.env.ENGRAM_CONSOLE_EMAIL, process.env.ENGRAM_CONSOLE_PASSWORD);
      await owner.getByTestId('nav-recall').click();
      await owner.waitForURL((url) => url.pathname === '/console/recall');
      await hydrated(owner);
      const summary = owner.getByTestId('recall-summary');
      await summary.waitFor();
      assert(await summary.getAttribute('data-searches') === process.env.EXPECTED_SEARCHES, 'searches');
      assert(await summary.getAttribute('data-empty') === process.env.EXPECTED_EMPTY, 'empty searches');
      assert(await bars(owner, 'chart-recall-volume').count() === 7, 'one bar per day of 7');
      const today = await bars(owner, 'chart-recall-volume').last().getAttribute('data-value');
      assert(today === process.env.EXPECTED_SEARCHES, `today's bar is ${today}`);
      const latencyPoints = owner.locator('[data-testid="chart-recall-latency"] circle.point');
      assert(await latencyPoints.count() === 3, 'p50, p95 and p99 of today');
      assert(await bars(owner, 'chart-recall-top-scores').count() === 10, 'ten score bins');
      const scored = await bars(owner, 'chart-recall-top-scores').evaluateAll(
        (rects) => rects.reduce((sum, rect) => sum + Number(rect.getAttribute('data-value')), 0));
      assert(scored === Number(process.env.EXPECTED_SEARCHES) - Number(process.env.EXPECTED_EMPTY),
        `searches with a best score: ${scored}`);
      const precision = owner.locator('[data-testid="chart-recall-precision"] circle.point');
      assert(await precision.count() === 1, 'one day with feedback');
      assert(await precision.first().getAttribute('data-value') === '100', 'one relevant rating');
      assert((await owner.getByTestId('figure-precision').textContent()).includes('100.0 %'), 'precision figure');
    }],
    ['a query that found nothing drills down to its recall event', async () => {
      const first = owner.getByTestId('empty-query').first();
      assert((await first.textContent()).includes(process.env.EMPTY_QUERY), await first.textContent());
      assert(await first.getAttribute('data-count') === '2', 'asked twice');
      await first.getByTestId('empty-query-link').click();
      const event = owner.getByTestId('recall-event');
      await event.waitFor();
      assert((await owner.getByTestId('recall-event-query').textContent()) === process.env.EMPTY_QUERY, 'its query');
      assert((await event.textContent()).includes('The search returned nothing.'), 'no results');
      assert((await owner.getByTestId('recall-event-stages').textContent()).includes('ms in all'), 'stages');
    }],
    ['a recall with results lists them with ranks and scores', async () => {
      await owner.goto(`${base}/console/recall?project=${project}&recall=${process.env.FOUND_RECALL_ID}`);
      await hydrated(owner);
      const rows = owner.getByTestId('recalled-memory');
      await rows.first().waitFor();
      assert(await rows.count() === 1, 'one result');
      const row = await rows.first().textContent();
      assert(row.includes(process.env.FOUND_CONTENT) && row.includes('active'), row);
    }],
    ['the evaluation history marks the regression', async () => {
      const set = owner.locator(`[data-testid="evaluation-set"][data-name="${process.env.EVAL_SET}"]`);
      await set.waitFor();
      assert(await set.getAttribute('data-runs') === '2', 'two runs charted');
      assert(await set.getAttribute('data-regression') === 'true', 'the last one regressed');
      assert((await set.getByTestId('evaluation-status').textContent()).includes('hit_at_k fell'), 'why');
      assert(await set.locator('circle.marked').count() === 1, 'one point ringed');
      const comparison = set.getByTestId('evaluation-comparison');
      assert((await comparison.locator('caption').textContent()).includes('default vs words'), 'the profiles compared');
      assert(await comparison.getByTestId('comparison-row').count() === 4, 'four figures with intervals');
      await screenshot(owner, '60-recall.png');
    }],
    ['a set created in the console runs on request', async () => {
      await owner.goto(`${base}/console/recall?project=${project}`);
      await hydrated(owner);
      await owner.getByTestId('new-evaluation-set').locator('summary').click();
      await owner.getByTestId('evaluation-name').fill('console-set');
      await owner.getByTestId('evaluation-cases').fill(
        '{"query": "Portuguese", "user_id": "ines", "expected_contents": ["speaks Portuguese"]}\n'
        + '{"query": "submarines", "user_id": "ines", "expected_contents": ["submarine"]}\n');
      await owner.getByTestId('evaluation-create').click();
      const created = owner.locator('[data-testid="evaluation-set"][data-name="console-set"]');
      await created.waitFor();
      assert(await created.getAttribute('data-runs') === '0', 'no run yet');
      assert((await created.locator('figcaption').textContent()).includes('2 cases'), 'two cases imported');
      await created.getByTestId('evaluation-run').click();
      // The run is a task: reload until it has finished and is charted.
      await until('the run is charted', async () => {
        await owner.reload();
        await hydrated(owner);
        return (await owner.locator('[data-testid="evaluation-set"][data-name="console-set"]').getAttribute('data-runs')) === '1';
      });
      const point = owner.locator('[data-testid="evaluation-set"][data-name="console-set"] circle.point[data-series="hit@10"]');
      assert(await point.getAttribute('data-value') === '0.5', 'one of two cases found');
    }],
    ['a bad case line is refused with its line number', async () => {
      await owner.getByTestId('new-evaluation-set').locator('summary').click();
      await owner.getByTestId('evaluation-name').fill('broken');
      await owner.getByTestId('evaluation-cases').fill('{"query": "x", "expected_contents": ["y"]}\nnot json\n');
      await owner.getByTestId('evaluation-create').click();
      const error = owner.getByTestId('evaluation-error');
      await error.waitFor();
      assert((await error.textContent()).includes('line 2'), await error.textContent());
      assert(await owner.locator('[data-testid="evaluation-set"][data-name="broken"]').count() === 0, 'nothing created');
    }],
    ['the date range picker narrows the window', async () => {
      await owner.getByTestId('recall-from').fill('2026-01-01');
      await owner.getByTestId('recall-to').fill('2026-01-03');
      await until('an empty window', async () =>
        (await owner.getByTestId('recall-summary').getAttribute('data-searches')) === '0');
      assert(await bars(owner, 'chart-recall-volume').count() === 3, 'three days');
    }],
    ['an analyst sees the figures but not the query texts', async () => {
      const analyst = await newPage(browser, browserErrors);
      await signIn(analyst, process.env.ANALYST_EMAIL, process.env.ANALYST_PASSWORD);
      await analyst.goto(`${base}/console/recall?project=${project}`);
      await hydrated(analyst);
      const summary = analyst.getByTestId('recall-summary');
      await summary.waitFor();
      assert(await summary.getAttribute('data-searches') === process.env.EXPECTED_SEARCHES, 'same figures');
      const text = await analyst.getByTestId('empty-query').first().textContent();
      assert(text.includes('(query text not shown)') && !text.includes(process.env.EMPTY_QUERY), text);
    }],
    ['the browser reported no errors', async () => {
      assert(browserErrors.length === 0, browserErrors.join('; '));
    }],
  ];
  return steps;
});
