// Budget governance in the browser: a researcher proposes, the manager approves, the tree changes.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { TestServer } from '../support/server.mjs';
import { launchBrowser, signIn, waitForHydration, withPage } from '../support/browser.mjs';

const ORG = `
[shares]
"ai" = 1
"ai/olmo" = 3
"ai/molmo" = 1

[owners]
"" = ["root"]
"ai" = ["pat"]

[members]
"ai/olmo" = ["ada"]
"ai/molmo" = ["bob"]
`;

describe('budget governance', () => {
  let server;
  let browser;

  before(async () => {
    server = await TestServer.start();
    server.createUser('root', 'admin', 'root-password-1');
    server.createUser('pat', 'researcher', 'pat-password-1');
    server.createUser('bob', 'researcher', 'bob-password-1');
    server.createUser('ada', 'researcher', 'ada-password-1');
    server.importTree(ORG);
    await server.startAgent('n1', 2);
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  test('a researcher proposes, the manager approves, and the tree and history show it', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'bob', 'bob-password-1');
      await page.getByRole('heading', { name: 'Welcome, bob' }).waitFor();
      await page.goto(`${server.url}/tree`);
      await waitForHydration(page);
      const molmo = page.getByRole('row', { name: /molmo/ });
      assert.match(await molmo.textContent(), /25\.0%/);
      await page.getByRole('button', { name: 'Propose a change to ai' }).click();
      const inView = (locator) =>
        locator.evaluate((el) => {
          const r = el.getBoundingClientRect();
          return r.top < window.innerHeight && r.bottom > 0;
        });
      const opened = page.getByRole('region', { name: 'Rebalance ai' });
      await opened.waitFor();
      await page.waitForFunction(() => document.activeElement?.classList.contains('share-input'));
      assert.equal(await inView(opened), true, 'the editor scrolls into view when it opens');
      await page.getByLabel('Share of molmo').fill('3');
      await page.getByLabel('Share of olmo').fill('3');
      const editor = page.getByRole('region', { name: 'Rebalance ai' });
      await editor.getByText('50.0%').first().waitFor();
      await page.getByLabel('Justification').fill('Robotics season starts; molmo needs half.');
      await page.getByRole('button', { name: 'Submit for approval' }).click();
      const done = page.getByText(/Change request #\d+ for ai submitted/);
      await done.waitFor();
      await page.waitForFunction(() => {
        const r = document.querySelector('p.notice[role="status"]')?.getBoundingClientRect();
        return r && r.top < window.innerHeight && r.bottom > 0;
      });

      await page.getByRole('button', { name: 'Sign out' }).click();
      await signIn(page, server.url, 'pat', 'pat-password-1');
      await page.getByRole('heading', { name: 'Welcome, pat' }).waitFor();
      // The navigation says a request waits for pat, on every page.
      const nav = page.getByRole('navigation', { name: 'Main' });
      await nav.getByRole('link', { name: /^Approvals.*1 waiting for you$/ }).waitFor();
      await nav.getByRole('link', { name: /^Approvals/ }).click();
      const card = page.getByRole('article', { name: /proposed by bob/ });
      await card.waitFor();
      assert.match(await card.textContent(), /Robotics season starts/);
      await waitForHydration(page);
      await card.getByRole('button', { name: 'Preview impact' }).click();
      const impact = card.locator('table.impact');
      await card.getByText(/^The last 14 days replayed twice/).waitFor();
      await impact.getByRole('cell', { name: 'ai/molmo' }).waitFor();
      // Shares in percent and in GPUs, now and proposed, next to the predicted ratio and wait.
      const molmoImpact = impact.getByRole('row', { name: /ai\/molmo/ });
      assert.match(await molmoImpact.textContent(), /25\.0% \([\d.]+ GPUs?\)\s*50\.0% \([\d.]+ GPUs?\)/);
      await card.getByLabel('Comment').fill('Agreed for this quarter.');
      await card.getByRole('button', { name: 'Approve' }).click();
      await page.getByText('Nothing awaits your decision.').waitFor();
      // Deciding clears the count, without a reload.
      await nav.getByRole('link', { name: 'Approvals', exact: true }).waitFor();
      const history = page.getByRole('region', { name: 'History' });
      await history.getByRole('cell', { name: 'applied' }).waitFor();
      assert.match(await history.textContent(), /Agreed for this quarter/);

      await page.goto(`${server.url}/tree`);
      assert.match(await page.getByRole('row', { name: /molmo/ }).textContent(), /50\.0%/);
    });
  });

  test("the proposer finds the decision in the inbox, and reading it clears the header's count", async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'bob', 'bob-password-1');
      await page.getByRole('heading', { name: 'Welcome, bob' }).waitFor();
      const inbox = page.getByRole('link', { name: /^Inbox.*1 unread$/ });
      await inbox.waitFor();
      await inbox.click();
      await page.getByRole('heading', { name: 'Inbox' }).waitFor();
      const item = page.getByRole('listitem', { name: /^Change request #\d+ on ai \(unread\)$/ });
      await item.waitFor();
      assert.match(await item.textContent(), /pat approved it; the new shares are in effect\. Their comment: “Agreed for this quarter\.”/);
      await waitForHydration(page);
      await page.getByRole('button', { name: 'Mark all as read' }).click();
      await page.getByText('All read.').waitFor();
      // The header follows without a reload.
      await page.getByRole('link', { name: 'Inbox', exact: true }).waitFor();
      await page.getByRole('listitem', { name: /^Change request #\d+ on ai$/ }).waitFor();
    });
  });

  test('the share history names the request that changed a share, and the effective share it gave', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'ada', 'ada-password-1');
      await page.getByRole('heading', { name: 'Welcome, ada' }).waitFor();
      await page.goto(`${server.url}/tree`);
      await waitForHydration(page);
      await page.getByRole('button', { name: 'Share history of ai/molmo' }).click();
      const panel = page.getByRole('region', { name: 'Share history of ai/molmo' });
      const versions = panel.getByRole('table', { name: 'Share versions' });
      const latest = versions.getByRole('row').nth(1);
      await latest.waitFor();
      assert.match(await latest.textContent(), /in force\s*3\s*request #\d+, proposed by bob, approved by pat: “Robotics season starts; molmo needs half\.”/);
      assert.match(await versions.getByRole('row').nth(2).textContent(), /imported from the tree file by an admin/);
      await panel.getByRole('img', { name: 'Its effective share of the cluster went from 25.0% to 50.0% in one change.' }).waitFor();
      await panel.getByRole('button', { name: 'Close' }).click();
      await panel.waitFor({ state: 'detached' });
    });
  });

  test('a proposal with no justification is refused before it is sent', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'ada', 'ada-password-1');
      await page.getByRole('heading', { name: 'Welcome, ada' }).waitFor();
      await page.goto(`${server.url}/tree`);
      await waitForHydration(page);
      await page.getByRole('button', { name: 'Propose a change to ai' }).click();
      await page.getByRole('button', { name: 'Submit for approval' }).click();
      await page.getByRole('alert').filter({ hasText: 'Add a justification' }).waitFor();
    });
  });

  test('a proposal the server refuses keeps everything that was typed', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'ada', 'ada-password-1');
      await page.getByRole('heading', { name: 'Welcome, ada' }).waitFor();
      await page.goto(`${server.url}/tree`);
      await waitForHydration(page);
      await page.getByRole('button', { name: 'Propose a change to ai' }).click();
      await page.getByLabel('Share of molmo').fill('2');
      await page.getByLabel('Justification').fill('Kept across a refusal.');
      await page.getByLabel('Effective date (optional)').fill('2001-01-01');
      await page.getByRole('button', { name: 'Submit for approval' }).click();
      await page.getByRole('alert').filter({ hasText: /past/ }).waitFor();
      assert.equal(await page.getByLabel('Share of molmo').inputValue(), '2');
      assert.equal(await page.getByLabel('Justification').inputValue(), 'Kept across a refusal.');
      assert.equal(await page.getByLabel('Effective date (optional)').inputValue(), '2001-01-01');
    });
  });

  test('a negative share is named at once, not previewed as 0%', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'ada', 'ada-password-1');
      await page.getByRole('heading', { name: 'Welcome, ada' }).waitFor();
      await page.goto(`${server.url}/tree`);
      await waitForHydration(page);
      await page.getByRole('button', { name: 'Propose a change to ai' }).click();
      await page.getByLabel('Share of molmo').fill('-10');
      await page
        .getByRole('alert')
        .filter({ hasText: 'The share of "molmo" must be a number, 0 or more (not "-10").' })
        .waitFor();
      const molmo = page.locator('tr', { has: page.getByLabel('Share of molmo') });
      // Of the parent and of the cluster after: not a number, rather than 0.0%.
      assert.equal(await molmo.locator('td').nth(2).textContent(), '—');
      assert.equal(await molmo.locator('td').nth(4).textContent(), '—');
    });
  });

  test('a request overtaken by another change says it is stale; its proposer rebases it, withdraws the new one, and opens it from the history', async (t) => {
    const [bob, pat] = [server.apiToken('bob'), server.apiToken('pat')];
    const post = (token, path, body) => server.postJson(token, path, body);
    await post(bob, '/api/v1/change-requests', {
      node: 'ai', shares: { 'ai/olmo': 2, 'ai/molmo': 2 }, justification: 'overtaken-request',
    });
    const winner = await post(bob, '/api/v1/change-requests', {
      node: 'ai', shares: { 'ai/olmo': 1, 'ai/molmo': 1 }, justification: 'winning-request',
    });
    await post(pat, `/api/v1/change-requests/${winner.id}/approve`, { comment: 'ok' });
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'bob', 'bob-password-1');
      await page.getByRole('heading', { name: 'Welcome, bob' }).waitFor();
      await page.goto(`${server.url}/approvals`);
      const row = page.getByRole('row', { name: /overtaken-request/ });
      await row.getByText('stale', { exact: true }).waitFor();
      await row.getByText(/another change to the same shares took effect first.*rebase it onto them/).waitFor();

      // Its proposer rebases it from their own waiting requests: a new request on today's shares.
      await waitForHydration(page);
      const mine = page.getByRole('region', { name: 'Your requests still waiting' });
      const card = mine.getByRole('article').filter({ hasText: 'overtaken-request' });
      await card.getByText('stale', { exact: true }).waitFor();
      await card.getByRole('button', { name: "Rebase onto today's shares" }).click();
      const rebased = await page.getByRole('status').getByText(/^Rebased onto today's shares as request #(\d+)/).textContent();
      const newId = rebased.match(/#(\d+)/)[1];
      const fresh = mine.getByRole('article', { name: new RegExp(`^#${newId} · ai`) });
      await fresh.getByText('pending', { exact: true }).waitFor();
      assert.equal(await fresh.getByRole('button', { name: "Rebase onto today's shares" }).count(), 0, 'a fresh request needs no rebase');
      await page.getByRole('row', { name: /overtaken-request/ }).first().getByRole('link', { name: `#${newId}` }).waitFor();

      // Then withdraws it, after saying yes.
      await fresh.getByRole('button', { name: 'Withdraw' }).click();
      const confirm = fresh.getByRole('group', { name: 'Confirm withdrawing' });
      await confirm.getByText(`Withdraw request #${newId}?`).waitFor();
      await confirm.getByRole('button', { name: 'Yes, withdraw it' }).click();
      await page.getByRole('status').getByText(`Request #${newId} is withdrawn; no one can approve it now.`).waitFor();
      await mine.getByText(/^None: requests you propose/).waitFor();

      // Opened from the history, the request shows its state and offers nothing more.
      await page.getByRole('link', { name: `Open request #${newId}` }).click();
      const opened = page.getByRole('region', { name: `Request #${newId}` });
      await opened.getByText('withdrawn', { exact: true }).waitFor();
      assert.equal(await opened.getByRole('button').count(), 1, 'only the impact preview');
      if (process.env.HOURGLASS_SHOTS) await page.screenshot({ path: `${process.env.HOURGLASS_SHOTS}/approvals.png`, fullPage: true });
    });
  });

  test('an owner adds a project through a request; once another owner approves it, the tree has it', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'pat', 'pat-password-1');
      await page.getByRole('heading', { name: 'Welcome, pat' }).waitFor();
      await page.goto(`${server.url}/tree`);
      await waitForHydration(page);
      assert.equal(await page.getByRole('row', { name: /\brl\b/ }).count(), 0);
      await page.getByRole('button', { name: 'Propose a change to ai' }).click();
      const editor = page.getByRole('region', { name: 'Rebalance ai' });
      await editor.waitFor();
      await editor.getByRole('button', { name: 'Add a child' }).click();
      await editor.getByLabel('Name of child 3').fill('rl');
      await editor.getByLabel('Share of rl').fill('2');
      // Two of four shares: half of ai, next to the existing children's quarters.
      await editor.getByRole('row', { name: /rl/ }).getByText('50.0%').first().waitFor();
      await editor.getByLabel('Justification').fill('A reinforcement-learning project starts this month.');
      await editor.getByRole('button', { name: 'Submit for approval' }).click();
      await page.getByText(/Change request #\d+ for ai submitted/).waitFor();
      // Proposing changes nothing yet.
      await page.goto(`${server.url}/tree`);
      await page.getByRole('row', { name: /olmo/ }).first().waitFor();
      assert.equal(await page.getByRole('row', { name: /\brl\b/ }).count(), 0, 'not before approval');

      await page.getByRole('button', { name: 'Sign out' }).click();
      await signIn(page, server.url, 'root', 'root-password-1');
      await page.getByRole('heading', { name: 'Welcome, root' }).waitFor();
      await page.goto(`${server.url}/approvals`);
      const card = page.getByRole('article', { name: /proposed by pat/ });
      await card.waitFor();
      const added = card.getByRole('row', { name: /\brl\b/ });
      assert.match(await added.textContent(), /rl\s*add\s*—?\s*50\.0%/);
      await waitForHydration(page);
      await card.getByLabel('Comment').fill('Welcome, rl.');
      await card.getByRole('button', { name: 'Approve' }).click();
      await card.waitFor({ state: 'detached' });

      await page.goto(`${server.url}/tree`);
      const rl = page.getByRole('row', { name: /\brl\b/ });
      await rl.waitFor();
      assert.match(await rl.textContent(), /50\.0%/);
    });
  });
});
