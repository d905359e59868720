// The Nodes page for an admin: registering a node gives the exact command to run on it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { TestServer } from '../support/server.mjs';
import { launchBrowser, signIn, waitForHydration, withPage } from '../support/browser.mjs';

describe('registering a node', () => {
  let server;
  let browser;

  before(async () => {
    server = await TestServer.start();
    server.createUser('admin', 'admin', 'admin-password-1');
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  test('the agent command names the node that was registered and its cluster', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'admin', 'admin-password-1');
      await page.getByRole('heading', { name: 'Welcome, admin' }).waitFor();
      await page.goto(`${server.url}/nodes`);
      await waitForHydration(page);
      await page.getByText('No GPU nodes are registered yet.').waitFor();

      await page.getByLabel('Node name').fill('gpu-9');
      await page.getByRole('textbox', { name: 'Cluster' }).fill('h100');
      await page.getByRole('button', { name: 'Register' }).click();
      const shown = page.getByRole('status').filter({ hasText: 'gpu-9 is registered' });
      await shown.waitFor();
      const command = await shown.locator('pre').textContent();
      assert.match(command, /^hourglass agent --server http:\/\/[^ ]+ --name gpu-9 --cluster h100 --gpus auto --token hgn_[0-9a-f]{64}$/);
      // One click copies it.
      await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
      await page.getByRole('button', { name: 'Copy the agent command' }).click();
      await shown.getByText('Copied.').waitFor();
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), command);
      // The node is listed, never connected, and can be removed (registered by mistake).
      await page.getByText('never connected').waitFor();
      await page.getByRole('button', { name: 'Remove gpu-9' }).click();
      await page.getByText('No GPU nodes are registered yet.').waitFor();
    });
  });
});
