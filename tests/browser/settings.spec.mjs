// Drives the console's data-governance settings in the system Chromium (playwright-core):
// the retention dry run names the expired memory, PII masking and an episodic retention are
// saved (and still there after a reload), and "Run the sweep now" removes exactly what the
// dry run named. Prints `N passed, N failed`; exits non-zero on any failure.
//
// Environment: ENGRAM_URL, ENGRAM_CONSOLE_EMAIL, ENGRAM_CONSOLE_PASSWORD.

import { assert, base, hydrated, newPage, runSteps, screenshot, signIn, until } from './harness.mjs';

await runSteps(async (browser) => {
  const browserErrors = [];
  const page = await newPage(browser, browserErrors);
  const preview = () => page.getByTestId('retention-preview');
  const steps = [
    ['the dry run names the expired memory', async () => {
      await signIn(page, process.env.ENGRAM_CONSOLE_EMAIL, process.env.ENGRAM_CONSOLE_PASSWORD);
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
      // The relevance floor: the model's two floors in effect on a new project, then a
      // number kept and applied (the one floor), a wrong one refused naming the field.
      const inEffect = await page.getByTestId('settings-relevance-floor-in-effect').textContent();
      assert(inEffect.includes('0.150') && inEffect.includes('0.450'), inEffect);
      await page.getByTestId('settings-relevance-floor').fill('0.38');
      await page.getByTestId('settings-save').click();
      await until('the floor in effect', async () =>
        (await page.getByTestId('settings-relevance-floor-in-effect').textContent()).includes('0.380'));
      assert(!(await page.getByTestId('settings-relevance-floor-in-effect').textContent()).includes('0.450'), 'a number set is the one floor');
      await page.reload();
      await hydrated(page);
      assert((await page.getByTestId('settings-relevance-floor').inputValue()) === '0.38', 'floor kept');
      await page.getByTestId('settings-relevance-floor').fill('high');
      await page.getByTestId('settings-save').click();
      await page.getByTestId('settings-error').waitFor();
      assert((await page.getByTestId('settings-error').textContent()).includes('relevance_floor'), await page.getByTestId('settings-error').textContent());
      await page.getByTestId('settings-relevance-floor').fill('0.38');
      await screenshot(page, '40-settings.png');
    }],
    ['the sweep removes what the dry run named', async () => {
      await page.getByTestId('sweep-now-ask').click();
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
  return steps;
});
