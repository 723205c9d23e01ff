// Drives the usage and cost page in the system Chromium (playwright-core): today's usage per
// unit and cost per day are drawn as bars, the organization's projects are ranked by cost,
// the cost is broken down by key, end-user and channel,
// a budget saved in the form draws the burn-down's budget line (and a forecast past it is
// said), every axis label of every chart page lies inside its chart, the range switches, the
// price book takes a price per million and a scheduled price that is withdrawn, the
// organization's statement adds up with a CSV that says the same, and an analyst sees the
// charts, prices and statement without being able to change the limits or prices. Prints `N
// passed, N failed`; exits non-zero on any failure.
//
// Environment: ENGRAM_URL, ENGRAM_CONSOLE_EMAIL, ENGRAM_CONSOLE_PASSWORD, ANALYST_EMAIL,
// ANALYST_PASSWORD, PROJECT_ID (the default project), EXPECTED_SEARCHES,
// EXPECTED_WRITES, EXPECTED_COST_MICROS (today's cost of the default project), LLM_MODEL
// (the model whose 1,234 tokens in and 56 out the page must list), EXPECTED_ORG_TOTAL (this
// month's cost of the whole organization, exact).

import { assert, base, hydrated, newPage, runSteps, screenshot, signIn, until } from './harness.mjs';

const expectedSearches = process.env.EXPECTED_SEARCHES;
const expectedWrites = process.env.EXPECTED_WRITES;
const expectedCost = process.env.EXPECTED_COST_MICROS;

const bars = (page, chart) => page.locator(`[data-testid="${chart}"] rect.bar`);

/// Every text of every chart on the page whose box is not inside its chart's box, described.
async function labelsOutsideTheirChart(page) {
  return page.evaluate(() => {
    const outside = [];
    for (const chart of document.querySelectorAll('svg.chart')) {
      const box = chart.getBoundingClientRect();
      for (const text of chart.querySelectorAll('text')) {
        const label = text.getBoundingClientRect();
        if (label.left < box.left - 0.5 || label.right > box.right + 0.5
          || label.top < box.top - 0.5 || label.bottom > box.bottom + 0.5) {
          outside.push(`${chart.dataset.testid}: "${text.textContent}" at ${Math.round(label.left)}–${Math.round(label.right)} in ${Math.round(box.left)}–${Math.round(box.right)}`);
        }
      }
    }
    return outside;
  });
}

await runSteps(async (browser) => {
  const browserErrors = [];
  const owner = await newPage(browser, browserErrors);
  const steps = [
    ['today\'s usage is drawn per unit', async () => {
      await signIn(owner, process.env.ENGRAM_CONSOLE_EMAIL, process.env.ENGRAM_CONSOLE_PASSWORD);
      await owner.getByTestId('nav-usage').click();
      await owner.waitForURL((url) => url.pathname === '/console/usage');
      await hydrated(owner);
      await owner.getByTestId('usage-searches').waitFor();
      assert(await owner.getByTestId('usage-searches').getAttribute('data-total') === expectedSearches, 'searches total');
      assert(await owner.getByTestId('usage-memories_written').getAttribute('data-total') === expectedWrites, 'writes total');
      assert(await bars(owner, 'chart-usage-searches').count() === 30, 'one bar per day of 30');
      const today = await bars(owner, 'chart-usage-searches').last().getAttribute('data-value');
      assert(today === expectedSearches, `today's bar is ${today}`);
      const tokens = await owner.getByTestId('usage-tokens_embedded').getAttribute('data-total');
      assert(Number(tokens) > 0, `tokens embedded: ${tokens}`);
      assert(await owner.getByTestId('usage-llm_tokens_in').getAttribute('data-total') === '1234', 'LLM tokens in');
      const model = (await owner.getByTestId(`llm-model-${process.env.LLM_MODEL}`).textContent()).replace(/\s+/g, ' ');
      assert(model.includes('1,234') && model.includes('56'), `LLM tokens by model: ${model}`);
    }],
    ['cost per day and the top projects are drawn', async () => {
      const today = await bars(owner, 'chart-cost-per-day').last().getAttribute('data-value');
      assert(today === expectedCost, `today's cost is ${today}, expected ${expectedCost}`);
      const ranked = bars(owner, 'chart-top-projects');
      assert(await ranked.count() === 2, 'two projects ranked');
      assert(await ranked.first().getAttribute('data-project') === process.env.PROJECT_ID, 'the busiest project first');
    }],
    ['the cost is broken down by key, end-user, agent and channel', async () => {
      const entries = (by) => owner.locator(`[data-testid="breakdown-${by}"] [data-testid="breakdown-entry"]`);
      const entry = (by, label) => owner.locator(`[data-testid="breakdown-${by}"] [data-testid="breakdown-entry"][data-label="${label}"]`);
      // One key paid for everything, drawn as the longest bar.
      assert(await entries('key').first().getAttribute('data-cost') === expectedCost, 'the key pays all');
      assert(await bars(owner, 'chart-by-key').first().getAttribute('data-value') === expectedCost, 'the key\'s bar');
      // The searches named no end-user; the writes were Noor's.
      assert(await entry('end_user', 'none named').getAttribute('data-cost') === process.env.EXPECTED_UNNAMED_COST_MICROS, 'unnamed cost');
      assert(await entry('end_user', 'noor').getAttribute('data-cost') === process.env.EXPECTED_NOOR_COST_MICROS, 'Noor\'s cost');
      assert(await entry('channel', 'http').getAttribute('data-cost') === expectedCost, 'all through the API');
      // Every price was the operator's: no default-price note.
      assert(await owner.getByTestId('default-prices').count() === 0, 'no default prices used');
    }],
    ['a budget saved in the form draws the burn-down against it', async () => {
      await owner.getByTestId('limits-budget_amount').fill('0.05');
      await owner.getByTestId('limits-currency').fill('USD');
      await owner.getByTestId('limits-alert_thresholds').fill('50, 80');
      await owner.getByTestId('limits-hard_cap').check();
      await owner.getByTestId('limits-quota_file_bytes').fill('1000');
      await owner.getByTestId('limits-memory_per_end_user').fill('500');
      await owner.getByTestId('limits-memory_policy').selectOption('evict_least_important');
      await owner.getByTestId('limits-save').click();
      await owner.getByTestId('limits-saved').waitFor();
      const budgetLine = owner.getByTestId('burn-budget');
      // A horizontal line has no height, so Playwright never calls it visible: wait until it exists.
      await budgetLine.waitFor({ state: 'attached' });
      assert(await budgetLine.getAttribute('data-value') === '50000', 'budget line at 0.05 USD');
      const summary = owner.getByTestId('month-summary');
      assert(await summary.getAttribute('data-spent') === expectedCost, 'spent so far');
      assert(Number(await owner.getByTestId('burn-forecast').getAttribute('data-value')) >= Number(expectedCost), 'forecast');
      assert((await owner.getByTestId('budget-line').textContent()).includes('0.05 USD'), 'budget in words');
      // A forecast past the budget is said beside it (late in a month it may not be past).
      const forecast = Number(await summary.getAttribute('data-forecast'));
      const warned = await owner.getByTestId('forecast-over-budget').count();
      assert(warned === (forecast > 50000 ? 1 : 0), `forecast ${forecast} µUSD, warning shown ${warned}`);
      if (warned) {
        const text = await owner.getByTestId('forecast-over-budget').textContent();
        assert(text.includes('over its budget of 0.05 USD'), text);
      }
      await screenshot(owner, '50-usage.png');
      await owner.reload();
      await hydrated(owner);
      assert(await owner.getByTestId('limits-budget_amount').inputValue() === '0.05', 'kept after reload');
      assert(await owner.getByTestId('limits-hard_cap').isChecked(), 'hard cap kept');
      assert(await owner.getByTestId('limits-quota_file_bytes').inputValue() === '1000', 'file quota kept');
      assert(await owner.getByTestId('limits-memory_per_end_user').inputValue() === '500', 'memory limit kept');
      assert(await owner.getByTestId('limits-memory_policy').inputValue() === 'evict_least_important', 'eviction policy kept');
      assert(await owner.getByTestId('usage-memories_evicted').count() === 1, 'evictions are drawn with the other units');
      assert((await owner.getByTestId('quota-file_bytes').textContent()).includes('1,000'), 'file quota listed');
    }],
    ['a bad amount is refused with a message and changes nothing', async () => {
      await owner.getByTestId('limits-budget_amount').fill('lots');
      await owner.getByTestId('limits-save').click();
      const error = owner.getByTestId('limits-error');
      await error.waitFor();
      assert((await error.textContent()).includes('not an amount'), await error.textContent());
    }],
    ['every axis label lies inside its chart, on every chart page', async () => {
      const charts = await owner.locator('svg.chart').count();
      assert(charts >= 8, `the usage page draws its charts: ${charts}`);
      const outside = await labelsOutsideTheirChart(owner);
      assert(outside.length === 0, outside.join('; '));
      await owner.goto(`${base}/console/recall`);
      await hydrated(owner);
      await owner.getByTestId('chart-recall-volume').waitFor();
      const recallOutside = await labelsOutsideTheirChart(owner);
      assert(recallOutside.length === 0, recallOutside.join('; '));
      await owner.goto(`${base}/console/usage`);
      await hydrated(owner);
      await owner.getByTestId('chart-burn-down').waitFor();
    }],
    ['the price book takes a price per million and withdraws a scheduled one', async () => {
      await owner.getByTestId('nav-prices').click();
      await owner.waitForURL((url) => url.pathname === '/console/prices');
      await hydrated(owner);
      const current = (unit) => owner.locator(`[data-testid="price-${unit}"] [data-testid="price-current"]`);
      assert((await current('searches').textContent()) === '0.01 USD', await current('searches').textContent());
      await owner.getByTestId('price-unit').selectOption('file_bytes');
      await owner.getByTestId('price-amount').fill('0.02');
      await owner.getByTestId('price-per').selectOption('1000000');
      await owner.getByTestId('price-submit').click();
      await owner.getByTestId('prices-done').waitFor();
      await until('the price per byte', async () => (await current('file_bytes').textContent()) === '0.00000002 USD');
      assert((await owner.getByTestId('price-file_bytes').textContent()).includes('this organization'), 'set by the organization');
      // A price for next month is scheduled, listed, and withdrawn after a confirmation.
      const later = new Date(Date.now() + 40 * 86400000).toISOString().slice(0, 10);
      await owner.getByTestId('price-unit').selectOption('searches');
      await owner.getByTestId('price-amount').fill('0.02');
      await owner.getByTestId('price-per').selectOption('1');
      await owner.getByTestId('price-from').fill(later);
      await owner.getByTestId('price-submit').click();
      const scheduled = owner.locator('[data-testid="price-searches"] [data-testid="price-scheduled"]');
      await until('the scheduled price', async () => (await scheduled.count()) === 1);
      assert((await scheduled.textContent()).includes(`0.02 USD from ${later}`), await scheduled.textContent());
      await scheduled.getByTestId('price-withdraw-ask').click();
      await scheduled.getByTestId('price-withdraw').click();
      await until('the price withdrawn', async () => (await scheduled.count()) === 0);
      assert((await current('searches').textContent()) === '0.01 USD', 'today\'s price unchanged');
      // A price that is not a number is refused with the field named.
      await owner.getByTestId('price-from').fill('');
      await owner.getByTestId('price-amount').fill('lots');
      await owner.getByTestId('price-submit').click();
      await owner.getByTestId('prices-error').waitFor();
      assert((await owner.getByTestId('prices-error').textContent()).includes('price'), await owner.getByTestId('prices-error').textContent());
      await screenshot(owner, '51-prices.png');
    }],
    ['the organization\'s statement adds up and downloads as CSV', async () => {
      await owner.getByTestId('nav-statements').click();
      await owner.waitForURL((url) => url.pathname === '/console/statements');
      await hydrated(owner);
      const statement = owner.getByTestId('statement');
      await statement.waitFor();
      assert(await statement.getAttribute('data-provisional') === 'true', 'this month is provisional');
      assert((await owner.getByTestId('statement-status').textContent()).startsWith('Provisional'), 'said in words');
      const total = owner.locator('[data-testid="statement-total"][data-currency="USD"]');
      const expectedTotal = process.env.EXPECTED_ORG_TOTAL;
      assert(await total.getAttribute('data-total') === expectedTotal, `total ${await total.getAttribute('data-total')}, expected ${expectedTotal}`);
      assert((await total.textContent()).includes(`${expectedTotal} USD`), await total.textContent());
      const projects = owner.locator('[data-testid="statement-by-project"] [data-testid="statement-breakdown"]');
      assert(await projects.count() === 2, 'both projects');
      const searches = owner.locator('[data-testid="statement-line"][data-unit="searches"]');
      assert((await searches.textContent()).includes('0.01 USD'), await searches.textContent());
      const href = await owner.getByTestId('statement-csv').getAttribute('href');
      const csv = await owner.request.get(`${base}${href}`);
      assert(csv.status() === 200, `CSV status ${csv.status()}`);
      const text = await csv.text();
      assert(text.includes(`,total,,,,,,,USD,,,,${expectedTotal}`), text);
      await screenshot(owner, '52-statement.png');
    }],
    ['the range switches to 7 days', async () => {
      await owner.getByTestId('nav-usage').click();
      await owner.waitForURL((url) => url.pathname === '/console/usage');
      await hydrated(owner);
      await owner.getByTestId('usage-range').selectOption('7');
      await until('7 daily bars', async () => (await bars(owner, 'chart-usage-searches').count()) === 7);
    }],
    ['an analyst sees the charts but cannot change the limits', async () => {
      const analyst = await newPage(browser, browserErrors);
      await signIn(analyst, process.env.ANALYST_EMAIL, process.env.ANALYST_PASSWORD);
      await analyst.goto(`${base}/console/usage`);
      await hydrated(analyst);
      await analyst.getByTestId('chart-burn-down').waitFor();
      await analyst.getByTestId('limits-read-only').waitFor();
      assert(await analyst.getByTestId('limits-save').count() === 0, 'no save button');
      assert(await analyst.getByTestId('limits-budget_amount').isDisabled(), 'fields are read-only');
      await analyst.goto(`${base}/console/prices`);
      await hydrated(analyst);
      await analyst.getByTestId('price-table').waitFor();
      assert(await analyst.getByTestId('price-form').count() === 0, 'no price form for an analyst');
      await analyst.goto(`${base}/console/statements`);
      await hydrated(analyst);
      await analyst.getByTestId('statement').waitFor();
    }],
    ['the browser reported no errors', async () => {
      assert(browserErrors.length === 0, browserErrors.join('; '));
    }],
  ];
  return steps;
});
