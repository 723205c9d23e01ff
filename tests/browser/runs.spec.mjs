// Drives the Runs and Recalls pages and a memory's impact in the system Chromium
// (playwright-core): the scripted agent run is listed and opens its timeline — the context,
// the model call with the memory it was given as it was then, the tool call with its result;
// the Recalls page filtered by the run lists its context and search and opens one; the
// memory's page says how many runs it reached before the deletion is confirmed, and once
// deleted the timeline shows it as deleted with nothing of its text. Prints `N passed,
// N failed`; exits non-zero on any failure.
//
// Environment: ENGRAM_URL, ENGRAM_CONSOLE_EMAIL, ENGRAM_CONSOLE_PASSWORD, PROJECT_ID, RUN_ID,
// RUN_TASK, MEMORY_ID, MEMORY_CONTENT, TOOL_RESULT.

import { assert, base, hydrated, newPage, runSteps, screenshot, signIn } from './harness.mjs';

const project = process.env.PROJECT_ID;
const runId = process.env.RUN_ID;
const memoryId = process.env.MEMORY_ID;
const memoryContent = process.env.MEMORY_CONTENT;

await runSteps(async (browser) => {
  const browserErrors = [];
  const owner = await newPage(browser, browserErrors);
  const timeline = () => owner.getByTestId('run-timeline');
  return [
    ['the runs page lists the agent run and opens its timeline', async () => {
      await signIn(owner, process.env.ENGRAM_CONSOLE_EMAIL, process.env.ENGRAM_CONSOLE_PASSWORD);
      await owner.getByTestId('nav-runs').click();
      await owner.waitForURL((url) => url.pathname === '/console/runs');
      await hydrated(owner);
      const row = owner.locator(`[data-testid="run-row"][data-run-id="${runId}"]`);
      await row.waitFor();
      assert((await row.textContent()).includes('ended'), await row.textContent());
      await row.getByTestId('run-link').click();
      await timeline().waitFor();
      assert((await owner.getByTestId('run-task').textContent()) === process.env.RUN_TASK, 'the task');
      assert((await owner.getByTestId('run-outcome').textContent()) === 'success', 'the outcome');
      const types = await owner.getByTestId('run-step').evaluateAll(
        (steps) => steps.map((step) => step.getAttribute('data-step-type')));
      assert(JSON.stringify(types) === JSON.stringify(['context', 'model_call', 'tool_call', 'search']),
        `steps ${JSON.stringify(types)}`);
      const given = owner.locator('[data-step-type="model_call"] [data-testid="step-memory"]');
      assert(await given.count() === 1, 'one memory given to the model');
      assert((await given.getByTestId('step-memory-content').textContent()) === memoryContent,
        'the memory as it was then');
      const tool = owner.locator('[data-step-type="tool_call"]');
      assert((await tool.textContent()).includes(process.env.TOOL_RESULT), 'the tool result');
      await screenshot(owner, 'run-timeline.png');
    }],
    ['the recalls page filtered by the run lists its context and search', async () => {
      await owner.goto(`${base}/console/recalls?project=${project}&run_id=${runId}`);
      await hydrated(owner);
      await owner.getByTestId('recalls-table').waitFor();
      const purposes = await owner.getByTestId('recall-row').evaluateAll(
        (rows) => rows.map((row) => row.getAttribute('data-purpose')));
      assert(JSON.stringify(purposes) === JSON.stringify(['search', 'context']), JSON.stringify(purposes));
      await owner.getByTestId('recall-link').first().click();
      await owner.waitForURL((url) => url.pathname === '/console/recall');
      await owner.getByTestId('recall-event').waitFor();
    }],
    ['the memory page counts the runs it reached before the deletion is confirmed', async () => {
      await owner.goto(`${base}/console/memory?project=${project}&id=${memoryId}`);
      await hydrated(owner);
      const reach = (await owner.getByTestId('delete-impact').textContent()).trim();
      assert(reach.includes('1 run'), reach);
      assert(reach.includes('packed into 1 context'), reach);
      const kinds = await owner.getByTestId('impact-row').evaluateAll(
        (rows) => rows.map((row) => row.getAttribute('data-kind')));
      assert(kinds.includes('injected') && kinds.includes('packed'), JSON.stringify(kinds));
      await owner.getByTestId('delete-reason').fill('the allergy was recorded for the wrong person');
      await owner.getByTestId('delete-confirm').check();
      await owner.getByTestId('delete-submit').click();
      await owner.waitForURL((url) => url.pathname === '/console/memories');
      await hydrated(owner);
    }],
    ['the timeline shows the deleted memory as deleted, with nothing of it', async () => {
      await owner.goto(`${base}/console/runs?project=${project}&run=${runId}`);
      await hydrated(owner);
      await timeline().waitFor();
      const given = owner.locator('[data-step-type="model_call"] [data-testid="step-memory"]');
      assert(await given.getAttribute('data-deleted') === 'true', 'marked deleted');
      assert(!(await timeline().textContent()).includes(memoryContent), 'no text of it is left');
      assert(browserErrors.length === 0, browserErrors.join('\n'));
    }],
  ];
});
