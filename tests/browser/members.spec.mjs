// Drives the console's members page in the system Chromium (playwright-core): the owner
// invites a compliance officer (the link is shown once), the invitee opens the link in a
// browser of their own, is refused a short password, joins and is signed in; the owner
// changes the new member's role, which the member sees at once, then removes them, which
// ends their session; a used link stays dead. Prints `N passed, N failed`; exits non-zero on
// any failure.
//
// Environment: ENGRAM_URL, ENGRAM_CONSOLE_EMAIL, ENGRAM_CONSOLE_PASSWORD.

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const artifacts = path.join(here, 'artifacts');
const base = process.env.ENGRAM_URL.replace(/\/+$/, '');
const timeout = Number(process.env.ENGRAM_BROWSER_TIMEOUT_MS ?? 15000);
const invitee = 'officer@example.com';
const inviteePassword = 'correct horse battery staple';

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
  for (;;) {
    const value = await probe().catch(() => false);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
async function hydrated(page) {
  await page.waitForSelector('[data-testid="console-root"][data-hydrated="true"]');
}
async function screenshot(page, name) {
  mkdirSync(artifacts, { recursive: true });
  const file = path.join(artifacts, name);
  await page.screenshot({ path: file, fullPage: true });
  console.log(`  screenshot: ${file}`);
}
function memberRow(page, email) {
  return page.locator(`[data-testid="member-row"][data-email="${email}"]`);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--no-first-run', '--disable-sync', '--disable-quic'],
});
try {
  const viewport = { viewport: { width: 1280, height: 860 } };
  const owner = await (await browser.newContext(viewport)).newPage();
  // The invitee has a browser of their own: no cookies of the owner's.
  const member = await (await browser.newContext(viewport)).newPage();
  const browserErrors = [];
  for (const page of [owner, member]) {
    page.setDefaultTimeout(timeout);
    page.on('pageerror', (err) => browserErrors.push(`pageerror: ${err.message}`));
  }
  let link;
  const steps = [
    ['the owner signs in and opens the members page', async () => {
      await owner.goto(`${base}/console/login`);
      await hydrated(owner);
      await owner.getByTestId('login-email').fill(process.env.ENGRAM_CONSOLE_EMAIL);
      await owner.getByTestId('login-password').fill(process.env.ENGRAM_CONSOLE_PASSWORD);
      await owner.getByTestId('login-submit').click();
      await owner.waitForURL((url) => url.pathname === '/console/memories');
      await owner.getByTestId('nav-members').click();
      await owner.waitForURL((url) => url.pathname === '/console/members');
      await hydrated(owner);
      const self = memberRow(owner, process.env.ENGRAM_CONSOLE_EMAIL.toLowerCase());
      await self.waitFor();
      assert((await self.getAttribute('data-role')) === 'owner', 'the owner is listed as owner');
      assert((await self.getByTestId('remove-member').count()) === 0, 'no remove button on oneself');
    }],
    ['inviting shows the link once and lists the pending invitation', async () => {
      await owner.getByTestId('invite-email').fill(invitee);
      await owner.getByTestId('invite-role').selectOption('compliance');
      await owner.getByTestId('invite-submit').click();
      link = (await owner.getByTestId('invitation-link').textContent()).trim();
      assert(link.startsWith(`${base}/console/invite?token=`), `link: ${link}`);
      await owner.locator(`[data-testid="invitation-row"][data-email="${invitee}"]`).waitFor();
      await screenshot(owner, '20-members-invited.png');
      await owner.reload();
      await hydrated(owner);
      await owner.locator(`[data-testid="invitation-row"][data-email="${invitee}"]`).waitFor();
      assert(!(await owner.content()).includes(link.split('=')[1]), 'the link is shown again after a reload');
    }],
    ['the invitee opens the link, is refused a short password, then joins', async () => {
      await member.goto(link);
      await hydrated(member);
      const greeting = (await member.getByTestId('invite-greeting').textContent()).trim();
      assert(greeting.includes('compliance') && greeting.includes(invitee), `greeting: ${greeting}`);
      await member.getByTestId('invite-password').fill('short');
      await member.getByTestId('invite-password-again').fill('short');
      await member.getByTestId('accept-invitation').click();
      const error = (await member.getByTestId('invite-error').textContent()).trim();
      assert(error.includes('at least 12'), `error: ${error}`);
      await member.getByTestId('invite-password').fill(inviteePassword);
      await member.getByTestId('invite-password-again').fill(inviteePassword);
      await member.getByTestId('accept-invitation').click();
      await member.waitForURL((url) => url.pathname === '/console/memories');
      await hydrated(member);
    }],
    ['the owner sees the new member and makes them an analyst', async () => {
      await owner.reload();
      await hydrated(owner);
      const row = memberRow(owner, invitee);
      await row.waitFor();
      assert((await row.getAttribute('data-role')) === 'compliance', 'joined as compliance');
      assert((await owner.locator('[data-testid="invitation-row"]').count()) === 0, 'the invitation is used up');
      await row.getByTestId('member-role').selectOption('analyst');
      await row.getByTestId('change-role').click();
      await until('the analyst role', async () => (await memberRow(owner, invitee).getAttribute('data-role')) === 'analyst');
      await screenshot(owner, '21-members.png');
    }],
    ['the member, now an analyst, may not manage members', async () => {
      await member.goto(`${base}/console/members`);
      await hydrated(member);
      const notice = (await member.getByTestId('members-forbidden').textContent()).trim();
      assert(notice.includes('analyst'), `notice: ${notice}`);
    }],
    ['removing the member ends their session at once', async () => {
      const row = memberRow(owner, invitee);
      await row.getByTestId('remove-member').click();
      await until('the row to go', async () => (await memberRow(owner, invitee).count()) === 0);
      await member.goto(`${base}/console/memories`);
      await member.waitForURL((url) => url.pathname === '/console/login');
    }],
    ['the used link is dead', async () => {
      await member.goto(link);
      await hydrated(member);
      await member.getByTestId('invite-invalid').waitFor();
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
