// Settings: an admin sets how long finished workloads keep their output and timelines; a value
// out of range is refused with the field named and nothing changes.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { TestServer } from '../support/server.mjs';
import { launchBrowser, signIn, waitForHydration, withPage } from '../support/browser.mjs';

describe('settings', () => {
  let server;
  let browser;

  before(async () => {
    server = await TestServer.start();
    server.createUser('root', 'admin', 'root-password-1');
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  test('an admin changes the retention of output and timelines, after a refused zero', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'root', 'root-password-1');
      await page.goto(`${server.url}/settings`);
      await waitForHydration(page);
      const output = page.getByLabel('Keep output for (days)');
      const timelines = page.getByLabel('Keep timelines for (days)');
      assert.equal(await output.inputValue(), '30');
      assert.equal(await timelines.inputValue(), '180');

      await output.fill('0');
      await page.getByRole('button', { name: 'Save settings' }).click();
      await page.getByText('The output retention (days) must be between 1 and 3650.').waitFor();
      assert.equal(await page.getByRole('cell', { name: 'output_retention_days' }).count(), 0);

      await output.fill('14');
      await timelines.fill('90');
      await page.getByRole('button', { name: 'Save settings' }).click();
      await page.getByRole('status').getByText(/Saved/).waitFor();
      await page.getByRole('cell', { name: 'output_retention_days' }).waitFor();
      await page.getByRole('cell', { name: 'event_retention_days' }).waitFor();
      await page.reload();
      await waitForHydration(page);
      assert.equal(await page.getByLabel('Keep output for (days)').inputValue(), '14');
      assert.equal(await page.getByLabel('Keep timelines for (days)').inputValue(), '90');
    });
  });
});
