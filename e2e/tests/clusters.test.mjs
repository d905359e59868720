// Two clusters: a researcher chooses where a workload runs; the queue and the nodes filter by
// cluster.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { TestServer } from '../support/server.mjs';
import { launchBrowser, signIn, waitForHydration, withPage } from '../support/browser.mjs';

const ORG = `
[shares]
"ai" = 1
"ai/olmo" = 1
"ai/molmo" = 3

[owners]
"ai" = ["root"]

[members]
"ai/olmo" = ["ada"]
`;

describe('several clusters in the browser', () => {
  let server;
  let browser;

  before(async () => {
    server = await TestServer.start();
    server.createUser('root', 'admin', 'root-password-1');
    server.createUser('ada', 'researcher', 'ada-password-1');
    server.importTree(ORG);
    await server.startAgent('east-1', 1, 'east');
    await server.startAgent('west-1', 1, 'west');
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  async function submit(page, { name, cluster }) {
    await page.goto(`${server.url}/workloads/new`);
    await waitForHydration(page);
    await page.getByLabel('Name').fill(name);
    await page.getByLabel('Command').fill('sleep 600');
    await page.getByLabel('GPUs').fill('1');
    await page.getByLabel('Minimum runtime', { exact: true }).fill('15 min');
    if (cluster) await page.getByLabel('Cluster').selectOption(cluster);
    await page.getByRole('button', { name: 'Submit' }).click();
    await page.getByRole('heading', { name: new RegExp(name) }).waitFor();
  }

  test('a workload is submitted to the chosen cluster and the queue and nodes filter by cluster', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'ada', 'ada-password-1');
      await page.getByRole('heading', { name: 'Welcome, ada' }).waitFor();
      // The form asks which cluster, offering both.
      await page.goto(`${server.url}/workloads/new`);
      await waitForHydration(page);
      const choices = await page.getByLabel('Cluster').locator('option').allTextContents();
      assert.deepEqual(choices, ['Choose a cluster', 'east', 'west']);

      // One GPU each: the first on each cluster runs, the second waits on its own cluster.
      await submit(page, { name: 'east-a', cluster: 'east' });
      await page.getByText('Cluster', { exact: true }).waitFor();
      await page.locator('.state', { hasText: 'running' }).first().waitFor({ timeout: 15_000 });
      await submit(page, { name: 'east-b', cluster: 'east' });
      await submit(page, { name: 'west-a', cluster: 'west' });
      await page.locator('.state', { hasText: 'running' }).first().waitFor({ timeout: 15_000 });
      await submit(page, { name: 'west-b', cluster: 'west' });

      await page.goto(`${server.url}/queue`);
      await waitForHydration(page);
      const rows = page.getByRole('table', { name: 'Queue in scheduler order' }).locator('tbody tr');
      await page.getByRole('columnheader', { name: 'Cluster' }).waitFor();
      await rows.filter({ hasText: 'east-b' }).waitFor();
      await rows.filter({ hasText: 'west-b' }).waitFor();
      assert.equal(await rows.count(), 2);

      await page.getByLabel('Cluster').selectOption('west');
      await rows.filter({ hasText: 'east-b' }).waitFor({ state: 'detached' });
      assert.equal(await rows.count(), 1);
      assert.match(await rows.first().textContent(), /west-b/);
      await page.getByRole('status').filter({ hasText: '1 waiting workload.' }).waitFor();

      // A shared link keeps the filter.
      await page.goto(`${server.url}/queue?cluster=east`);
      await waitForHydration(page);
      await rows.filter({ hasText: 'east-b' }).waitFor();
      assert.equal(await rows.count(), 1);

      await page.goto(`${server.url}/nodes`);
      await waitForHydration(page);
      await page.getByRole('region', { name: 'Node east-1' }).waitFor();
      await page.getByLabel('Cluster').selectOption('east');
      await page.getByRole('region', { name: 'Node west-1' }).waitFor({ state: 'detached' });
      await page.getByRole('region', { name: 'Node east-1' }).getByText(/cluster east/).waitFor();
    });
  });

  test("the share editor starts a change for every cluster from the tree's shares, and one for a cluster from that cluster's own", async (t) => {
    // West gets shares of its own for ai's children: proposed by ada, approved by root.
    const request = await server.postJson(server.apiToken('ada'), '/api/v1/change-requests', {
      node: 'ai', shares: { 'ai/olmo': 2, 'ai/molmo': 2 }, justification: 'west-only-shares', cluster: 'west',
    });
    await server.postJson(server.apiToken('root'), `/api/v1/change-requests/${request.id}/approve`, { comment: 'ok' });

    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'root', 'root-password-1');
      await page.getByRole('heading', { name: 'Welcome, root' }).waitFor();
      // Without a cluster in the URL, the menu shows the cluster whose shares are shown: the
      // first (it has no "All clusters": each cluster keeps its own books).
      await page.goto(`${server.url}/tree`);
      await waitForHydration(page);
      assert.equal(await page.getByRole('combobox', { name: /^Cluster/ }).inputValue(), 'east');
      // The chart below the tree is of the cluster shown too.
      await page.getByRole('heading', { name: 'Allocation vs delivered on east, last two weeks' }).waitFor();
      await page.goto(`${server.url}/tree?cluster=west`);
      await waitForHydration(page);
      assert.equal(await page.getByRole('combobox', { name: /^Cluster/ }).inputValue(), 'west');
      await page.getByRole('heading', { name: 'Allocation vs delivered on west, last two weeks' }).waitFor();
      await page.getByRole('button', { name: 'Propose a change to ai' }).click();
      const editor = page.getByRole('region', { name: 'Rebalance ai' });
      await editor.waitFor();
      await editor.getByText(/west has shares of its own for these children/).waitFor();
      const molmo = editor.getByLabel('Share of molmo');
      assert.equal(await molmo.inputValue(), '3', "every cluster: the tree's share");
      const id = await molmo.getAttribute('id');
      const valueIs = (value) =>
        page.waitForFunction(([i, v]) => document.getElementById(i)?.value === v, [id, value]);
      await editor.getByLabel('Applies to').selectOption('west');
      await valueIs('2');
      await editor.getByLabel('Applies to').selectOption('');
      await valueIs('3');
    });
  });

  test('the overview gives standings on each cluster, named, since each keeps its own books', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'ada', 'ada-password-1');
      const projects = page.getByRole('region', { name: 'Your projects' });
      await projects.getByRole('rowheader', { name: 'ai/olmo' }).waitFor();
      const headers = await projects.getByRole('columnheader').allTextContents();
      assert.deepEqual(headers, ['Project', 'Ratio on east', 'Ratio on west']);
      assert.equal(await projects.getByRole('row', { name: /ai\/olmo/ }).getByRole('cell').count(), 2);
    });
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'root', 'root-password-1');
      const owned = page.getByRole('region', { name: 'What you own' });
      await owned.getByRole('rowheader', { name: 'ai', exact: true }).waitFor();
      const headers = await owned.getByRole('columnheader').allTextContents();
      assert.deepEqual(headers, ['Node', 'Share of east', 'Ratio on east', 'Share of west', 'Ratio on west']);
    });
  });
});

describe('a cluster named default beside another', () => {
  let server;
  let browser;

  before(async () => {
    server = await TestServer.start();
    server.createUser('root', 'admin', 'root-password-1');
    server.createUser('ada', 'researcher', 'ada-password-1');
    server.importTree(ORG);
    // An agent started without --cluster joins `default`.
    await server.startAgent('plain-1', 1);
    await server.startAgent('h100-1', 1, 'h100');
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  test("a workload's page names its cluster, default included, once there are several", async (t) => {
    const token = server.apiToken('ada');
    const submit = (cluster) => server.postJson(token, '/api/v1/workloads', {
      project: 'ai/olmo', name: `on-${cluster}`, command: 'sleep 600', gpus: 1,
      min_runtime_s: 900, resumable: true, priority: 0, cluster,
    });
    const plain = await submit('default');
    const h100 = await submit('h100');
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'ada', 'ada-password-1');
      await page.getByRole('heading', { name: 'Welcome, ada' }).waitFor();
      for (const [workload, cluster] of [[plain, 'default'], [h100, 'h100']]) {
        await page.goto(`${server.url}/workloads/${workload.id}`);
        await waitForHydration(page);
        const facts = page.locator('dl.facts');
        await facts.getByText('Cluster', { exact: true }).waitFor();
        assert.equal(await facts.locator('dt:text-is("Cluster") + dd').textContent(), cluster);
      }
    });
  });
});
