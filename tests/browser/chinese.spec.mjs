// Walks the console in Chinese: a browser asking for zh-CN gets the sign-in page and every
// main page in Chinese, with no English text left untranslated (text the user wrote — memory
// content, ids, names — is marked translate="no" and skipped); the top bar's switch turns the
// console to English for this account, whatever the browser asks. Prints `N passed, N failed`;
// exits non-zero on any failure.
//
// Environment: ENGRAM_URL, ENGRAM_CONSOLE_EMAIL, ENGRAM_CONSOLE_PASSWORD.

import { assert, base, hydrated, newPage, runSteps, screenshot, signIn, until } from './harness.mjs';

const PAGES = ['memories', 'subjects', 'settings', 'usage', 'statements', 'prices', 'recall', 'recalls',
  'runs', 'keys', 'audit', 'members'];

/// Words an English text may keep in a Chinese page: names, acronyms and the API's own
/// terms that the Chinese text quotes as they are.
const KEPT = new Set(['Engram', 'API', 'ID', 'UTC', 'CSV', 'NDJSON', 'JSON', 'MCP', 'LLM', 'Mem0', 'PATCH',
  'GET', 'POST', 'ms', 'MRR', 'nDCG', 'min_score', 'threshold', 'abstained', 'true', 'console', 'query',
  'user_id', 'expected_memory_ids', 'expected_contents', 'model', 'US', 'k', 'v', 'p']);

/// The visible texts of the page that still hold English words, outside translate="no".
async function untranslated(page) {
  const texts = await page.evaluate(() => {
    const found = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const node = walker.currentNode;
      const parent = node.parentElement;
      if (!parent || parent.closest('[translate="no"], script, style, code')) continue;
      const text = node.textContent.trim();
      if (text) found.push(text);
    }
    return found;
  });
  // A name quoted in a sentence (“default”) is the user's, like a translate="no" element.
  return texts.filter((text) => text.replace(/“[^”]*”/g, '').split(/[\s,;()（）“”"'’·—–→←…\[\]]+/).some((token) => {
    const word = token.replace(/[.:!?]+$/, '');
    // Identifiers, paths, numbers and model names (digits, `_`, `-`, `/`, `@`, `=`, an inner
    // `.` or `:`) are data, not text.
    if (!/^[A-Za-z]{2,}$/.test(word)) return false;
    return !KEPT.has(word);
  }));
}

async function openInChinese(page, name) {
  await page.goto(`${base}/console/${name}`);
  await hydrated(page);
  // Wait for the page's data: no "正在加载" (loading) line left.
  await until(`the ${name} page to load`, async () => !(await page.locator('main').innerText()).includes('正在加载'));
}

await runSteps(async (browser) => {
  const browserErrors = [];
  const page = await newPage(browser, browserErrors, { locale: 'zh-CN' });
  const steps = [
    ['a browser asking for Chinese gets the sign-in page in Chinese', async () => {
      await page.goto(`${base}/console/login`);
      await hydrated(page);
      assert((await page.getAttribute('html', 'lang')) === 'zh-CN', 'the page says it is Chinese');
      const text = await page.locator('main').innerText();
      assert(text.includes('登录管理控制台'), text);
      const left = await untranslated(page);
      assert(left.length === 0, `untranslated on the sign-in page: ${JSON.stringify(left)}`);
    }],
    ['every main page is in Chinese, with nothing left in English', async () => {
      await signIn(page, process.env.ENGRAM_CONSOLE_EMAIL, process.env.ENGRAM_CONSOLE_PASSWORD);
      for (const name of PAGES) {
        await openInChinese(page, name);
        const left = await untranslated(page);
        assert(left.length === 0, `untranslated on /console/${name}: ${JSON.stringify(left)}`);
      }
      // The pages one opens from them: a memory, an end-user, a recall event.
      await openInChinese(page, 'memories');
      await page.getByTestId('memory-link').first().click();
      await page.waitForURL((url) => url.pathname === '/console/memory');
      await openInChinese(page, `memory${new URL(page.url()).search}`);
      await page.getByTestId('memory-detail-content').waitFor();
      let left = await untranslated(page);
      assert(left.length === 0, `untranslated on a memory's page: ${JSON.stringify(left)}`);
      await openInChinese(page, 'subjects?user=li-wei');
      await page.getByTestId('subject-summary').waitFor();
      left = await untranslated(page);
      assert(left.length === 0, `untranslated on an end-user's page: ${JSON.stringify(left)}`);
      await openInChinese(page, 'recalls');
      await page.getByTestId('recall-link').first().click();
      await page.getByTestId('recall-event').waitFor();
      left = await untranslated(page);
      assert(left.length === 0, `untranslated on a recall event: ${JSON.stringify(left)}`);
      await openInChinese(page, 'memories');
      assert((await page.getByTestId('nav-memories').innerText()) === '记忆', 'the navigation is Chinese');
      await screenshot(page, '42-console-in-chinese.png');
    }],
    ['the top bar switches this account to English, whatever the browser asks', async () => {
      const switcher = page.getByTestId('language-switch');
      assert((await switcher.innerText()) === 'English', 'the switch offers English');
      await switcher.click();
      await until('the page to reload in English', async () => (await page.getAttribute('html', 'lang')) === 'en');
      await hydrated(page);
      assert((await page.getByTestId('nav-memories').innerText()) === 'Memories', 'the navigation is English');
      await screenshot(page, '43-console-in-english.png');
      // The choice is the account's: a new browser session asking for Chinese gets English.
      const other = await newPage(browser, browserErrors, { locale: 'zh-CN' });
      await signIn(other, process.env.ENGRAM_CONSOLE_EMAIL, process.env.ENGRAM_CONSOLE_PASSWORD);
      await hydrated(other);
      assert((await other.getAttribute('html', 'lang')) === 'en', 'the account chose English');
      assert((await other.getByTestId('language-switch').innerText()) === '中文', 'the switch offers Chinese');
    }],
    ['the browser reported no errors', async () => {
      assert(browserErrors.length === 0, browserErrors.join('; '));
    }],
  ];
  return steps;
});
