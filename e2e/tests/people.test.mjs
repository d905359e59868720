// People in the tree: an owner adds a member from the Budget tree page, who can then submit;
// a researcher who owns nothing there is refused, in the page and by the server.
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

describe('people in the tree', () => {
  let server;
  let browser;

  before(async () => {
    server = await TestServer.start();
    server.createUser('root', 'admin', 'root-password-1');
    server.createUser('pat', 'researcher', 'pat-password-1');
    server.createUser('bob', 'researcher', 'bob-password-1');
    server.createUser('ada', 'researcher', 'ada-password-1');
    server.createUser('cy', 'researcher', 'cy-password-1');
    server.importTree(ORG);
    await server.startAgent('n1', 1);
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  test('an owner adds a member, who can then submit work to the project', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'cy', 'cy-password-1');
      await page.goto(`${server.url}/workloads/new`);
      await page.getByText('You are not a member of any project yet').waitFor();
    });
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'pat', 'pat-password-1');
      await page.goto(`${server.url}/tree`);
      await waitForHydration(page);
      await page.getByRole('button', { name: 'People of ai/olmo' }).click();
      const panel = page.getByRole('region', { name: 'People of ai/olmo' });
      await panel.getByText(/An import by an admin added ada as a member/).waitFor();
      await panel.getByLabel('Add a member: username').fill('nobody');
      await panel.getByRole('button', { name: 'Add a member' }).click();
      await panel.getByRole('alert').filter({ hasText: 'there is no account named "nobody"' }).waitFor();
      await panel.getByLabel('Add a member: username').fill('cy');
      await panel.getByRole('button', { name: 'Add a member' }).click();
      await panel.getByRole('button', { name: 'Remove cy as member' }).waitFor();
      await panel.getByText(/pat added cy as a member/).waitFor();
    });
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'cy', 'cy-password-1');
      await page.goto(`${server.url}/workloads/new`);
      await waitForHydration(page);
      assert.deepEqual(await page.getByLabel('Project').locator('option').allTextContents(), ['ai/olmo']);
      await page.getByLabel('Name').fill('first-run');
      await page.getByLabel('Command').fill('true');
      await page.getByLabel('GPUs').fill('1');
      await page.getByRole('button', { name: 'Submit' }).click();
      await page.getByRole('heading', { name: /first-run/ }).waitFor();
    });
  });

  test('a researcher who owns nothing there may look but not add anyone', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'bob', 'bob-password-1');
      await page.goto(`${server.url}/tree`);
      await waitForHydration(page);
      await page.getByRole('button', { name: 'People of ai/olmo' }).click();
      const panel = page.getByRole('region', { name: 'People of ai/olmo' });
      await panel.getByText(/An import by an admin added ada as a member/).waitFor();
      assert.equal(await panel.getByLabel('Add a member: username').count(), 0);
      assert.equal(await panel.getByRole('button', { name: /^Remove/ }).count(), 0);
      // The server refuses the same request sent by hand.
      const response = await page.request.post(`${server.url}/api/budget/people/change`, {
        form: { kind: 'member', path: 'ai/olmo', username: 'bob', add: 'true' },
      });
      assert.equal(response.status(), 403);
    });
  });
});
