// Drives the console's members page in the system Chromium (playwright-core): the owner
// invites a compliance officer (the link is shown once), the invitee opens the link in a
// browser of their own, is refused a short password, joins and is signed in; the owner
// changes the new member's role, which the member sees at once, then removes them, which
// ends their session; a used link stays dead. Prints `N passed, N failed`; exits non-zero on
// any failure.
//
// Environment: ENGRAM_URL, ENGRAM_CONSOLE_EMAIL, ENGRAM_CONSOLE_PASSWORD.

import { assert, base, hydrated, newPage, runSteps, screenshot, signIn, until } from './harness.mjs';

const invitee = 'officer@example.com';
const inviteePassword = 'correct horse battery staple';

function memberRow(page, email) {
  return page.locator(`[data-testid="member-row"][data-email="${email}"]`);
}

await runSteps(async (browser) => {
  const browserErrors = [];
  const owner = await newPage(browser, browserErrors);
  // The invitee has a browser of their own: no cookies of the owner's.
  const member = await newPage(browser, browserErrors);
  let link;
  const steps = [
    ['the owner signs in and opens the members page', async () => {
      await signIn(owner, process.env.ENGRAM_CONSOLE_EMAIL, process.env.ENGRAM_CONSOLE_PASSWORD);
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
      await row.getByTestId('remove-member-ask').click();
      await row.getByTestId('remove-member').click();
      await until('the row to go', async () => (await memberRow(owner, invitee).count()) === 0);
      const done = (await owner.getByTestId('members-done').textContent()).trim();
      assert(done.includes('removed'), `reported: ${done}`);
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
  return steps;
});
