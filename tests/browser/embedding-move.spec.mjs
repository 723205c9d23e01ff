// Drives the console's settings page while the project moves to another embedding model: the
// page says where it moves from and to, and draws the task's progress. Prints
// `N passed, N failed`; exits non-zero on any failure.
//
// Environment: ENGRAM_URL, ENGRAM_CONSOLE_EMAIL, ENGRAM_CONSOLE_PASSWORD, ENGRAM_MOVE_TO
// (the model id moved to), ENGRAM_MOVE_MEMORIES (how many memories move).

import { assert, hydrated, newPage, runSteps, screenshot, signIn } from './harness.mjs';

await runSteps(async (browser) => {
  const browserErrors = [];
  const page = await newPage(browser, browserErrors);
  const steps = [
    ['the settings page shows the move under way with its progress', async () => {
      await signIn(page, process.env.ENGRAM_CONSOLE_EMAIL, process.env.ENGRAM_CONSOLE_PASSWORD);
      await page.getByTestId('nav-settings').click();
      await page.waitForURL((url) => url.pathname === '/console/settings');
      await hydrated(page);
      const card = page.getByTestId('embedding-move');
      await card.waitFor();
      const text = await card.textContent();
      assert(text.includes(`to ${process.env.ENGRAM_MOVE_TO}`), text);
      assert(text.includes(`of ${process.env.ENGRAM_MOVE_MEMORIES} memories embedded`), text);
      assert(text.includes('Searches use all-MiniLM-L6-v2 until'), text);
      const progress = page.getByTestId('embedding-move-progress');
      assert((await progress.getAttribute('max')) === process.env.ENGRAM_MOVE_MEMORIES, 'the bar counts every memory');
      await screenshot(page, '41-embedding-move.png');
    }],
    ['the browser reported no errors', async () => {
      assert(browserErrors.length === 0, browserErrors.join('; '));
    }],
  ];
  return steps;
});
