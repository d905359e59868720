// Live updates reach a page even when the change came before the page's stream opened.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { TestServer } from '../support/server.mjs';
import { launchBrowser, signIn, waitForHydration, withPage } from '../support/browser.mjs';

const ORG = `
[shares]
"ai" = 1
"ai/olmo" = 1

[owners]
"ai" = ["root"]

[members]
"ai/olmo" = ["ada"]
`;

describe('live updates', () => {
  let server;
  let browser;
  let token;

  before(async () => {
    server = await TestServer.start();
    server.createUser('root', 'admin', 'root-password-1');
    server.createUser('ada', 'researcher', 'ada-password-1');
    server.importTree(ORG);
    await server.startAgent('n1', 1);
    token = server.apiToken('ada');
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  const submit = (name) => server.postJson(token, '/api/v1/workloads', {
    project: 'ai/olmo', name, command: 'sleep 600', gpus: 1, min_runtime_s: 60, resumable: true, priority: 0,
  });

  async function stateOf(id) {
    const response = await fetch(`${server.url}/api/v1/workloads/${id}`, { headers: { authorization: `Bearer ${token}` } });
    return (await response.json()).state;
  }

  async function until(id, state) {
    const deadline = Date.now() + 30_000;
    while ((await stateOf(id)) !== state) {
      if (Date.now() > deadline) throw new Error(`workload ${id} never became ${state}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  test("a workload that starts before its page's stream opens is shown running once it opens", async (t) => {
    const first = await submit('first');
    await until(first.id, 'running');
    const second = await submit('second');
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'ada', 'ada-password-1');
      await page.getByRole('heading', { name: 'Welcome, ada' }).waitFor();
      // The page's stream is held back while the workload starts.
      let release;
      const held = new Promise((resolve) => { release = resolve; });
      await page.route('**/api/v1/stream', async (route) => {
        await held;
        await route.continue();
      });
      await page.goto(`${server.url}/workloads/${second.id}`);
      await waitForHydration(page);
      await page.locator('.state', { hasText: 'queued' }).waitFor();
      await server.postJson(token, `/api/v1/workloads/${first.id}/cancel`, {});
      await until(second.id, 'running');
      // What follows the start (the agent confirming the cancelled run's end, a reminder to
      // look again) is announced within a second or two: let it pass while the stream is held,
      // so that nothing announced after the stream opens can refresh the page.
      await page.waitForTimeout(3_000);
      assert.equal(await page.locator('.state', { hasText: 'queued' }).count(), 1, 'not updated while the stream is held');
      release();
      await page.locator('.state', { hasText: 'running' }).waitFor({ timeout: 10_000 });
    });
  });
});
