// Researchers' pages: submit, watch live, understand why; the queue; admins on the Nodes page.
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
"ai" = ["root"]

[members]
"ai/olmo" = ["ada"]
"ai/molmo" = ["bob"]
`;

describe('workloads in the browser', () => {
  let server;
  let browser;

  before(async () => {
    server = await TestServer.start();
    server.createUser('root', 'admin', 'root-password-1');
    server.createUser('ada', 'researcher', 'ada-password-1');
    server.createUser('bob', 'researcher', 'bob-password-1');
    server.importTree(ORG);
    await server.startAgent('n1', 2);
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  async function submit(page, { name, command, gpus = '1', minRuntime = '15 min' }) {
    await page.goto(`${server.url}/workloads/new`);
    await waitForHydration(page);
    await page.getByLabel('Name').fill(name);
    await page.getByLabel('Command').fill(command);
    await page.getByLabel('GPUs').fill(gpus);
    await page.getByLabel('Minimum runtime', { exact: true }).fill(minRuntime);
    await page.getByRole('button', { name: 'Submit' }).click();
  }

  test('a researcher submits a debug workload and watches it run and succeed without reloading', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'ada', 'ada-password-1');
      await page.getByRole('heading', { name: 'Welcome, ada' }).waitFor();
      // Long enough to be seen running after the page has loaded, even on a busy machine: with
      // `sleep 2` the run could finish before the workload page was hydrated.
      await submit(page, { name: 'debug-run', command: 'sleep 5; echo hello from $CUDA_VISIBLE_DEVICES' });
      await page.getByRole('heading', { name: /debug-run/ }).waitFor();
      assert.match(new URL(page.url()).pathname, /^\/workloads\/\d+$/);
      await page.evaluate(() => { window.__still_here = true; });
      await page.locator('.state', { hasText: 'running' }).first().waitFor({ timeout: 15_000 });
      await page.locator('.state', { hasText: 'succeeded' }).first().waitFor({ timeout: 20_000 });
      assert.equal(await page.evaluate(() => window.__still_here), true, 'the page updated itself, no reload');
      await page.getByLabel('Output log').filter({ hasText: 'hello from 0' }).waitFor();
      // What it cost: how long it waited and ran, and the GPU-hours charged to its project.
      const facts = page.locator('dl.facts');
      await facts.getByText(/^0\.0\d GPU-hours to ai\/olmo$/).waitFor();
      assert.match(await facts.textContent(), /Waited\s*\d+ s/);
      assert.match(await facts.textContent(), /Ran\s*\d+ s/);
    });
  });

  test('a free workload is preempted and its page says why', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'bob', 'bob-password-1');
      await page.getByRole('heading', { name: 'Welcome, bob' }).waitFor();
      await submit(page, { name: 'free-sweep', command: 'sleep 120', gpus: '2', minRuntime: '0' });
      await page.getByRole('heading', { name: /free-sweep/ }).waitFor();
      const freeUrl = page.url();
      await page.locator('.state', { hasText: 'running' }).first().waitFor({ timeout: 15_000 });

      const other = await browser.newContext();
      const adaPage = await other.newPage();
      await signIn(adaPage, server.url, 'ada', 'ada-password-1');
      await adaPage.getByRole('heading', { name: 'Welcome, ada' }).waitFor();
      await submit(adaPage, { name: 'urgent-debug', command: 'sleep 1' });
      await adaPage.getByRole('heading', { name: /urgent-debug/ }).waitFor();
      await other.close();

      await page.goto(freeUrl);
      const why = page.getByRole('region', { name: 'Why it was preempted' });
      await why.waitFor({ timeout: 15_000 });
      const text = await why.textContent();
      assert.match(text, /by urgent-debug \(project ai\/olmo/);
      assert.match(text, /free work gives way to any funded workload/);
    });
  });

  test('a form error is shown next to its field', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'ada', 'ada-password-1');
      await page.getByRole('heading', { name: 'Welcome, ada' }).waitFor();
      await submit(page, { name: 'too-big', command: 'true', gpus: '99' });
      const error = page.locator('#gpus-error');
      await error.filter({ hasText: 'more than the whole cluster' }).waitFor();
      assert.equal(await page.getByLabel('GPUs').getAttribute('aria-describedby'), 'gpus-error');
      assert.equal(new URL(page.url()).pathname, '/workloads/new');
    });
  });

  test('the minimum runtime takes any duration, with shortcuts up to the cap', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'ada', 'ada-password-1');
      await page.getByRole('heading', { name: 'Welcome, ada' }).waitFor();
      await page.goto(`${server.url}/workloads/new`);
      await waitForHydration(page);
      const field = page.getByLabel('Minimum runtime', { exact: true });
      assert.equal(await field.inputValue(), '15 min');
      await page.getByText("Any duration up to this cluster's cap of 8 h").waitFor();
      const shortcuts = page.getByRole('group', { name: 'Minimum runtime shortcuts' });
      await shortcuts.getByRole('button', { name: '1 h' }).click();
      assert.equal(await field.inputValue(), '1 h');
      assert.equal(await shortcuts.getByRole('button', { name: '1 h' }).getAttribute('aria-pressed'), 'true');
      // What it cannot read is named next to the field, and nothing is submitted.
      await page.getByLabel('Name').fill('odd-runtime');
      await page.getByLabel('Command').fill('true');
      await field.fill('soon');
      await page.getByRole('button', { name: 'Submit' }).click();
      await page.locator('#min-runtime-error').filter({ hasText: 'as a duration such as 15 min' }).waitFor();
      assert.equal(new URL(page.url()).pathname, '/workloads/new');
      // Free text between the shortcuts: 90 minutes.
      await field.fill('1h30m');
      await page.getByRole('button', { name: 'Submit' }).click();
      await page.getByRole('heading', { name: /odd-runtime/ }).waitFor();
      await page.getByText('1 h 30 min', { exact: true }).waitFor();
    });
  });

  test('a waiting workload and the queue page say when it should start', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'ada', 'ada-password-1');
      await page.getByRole('heading', { name: 'Welcome, ada' }).waitFor();
      await submit(page, { name: 'holder', command: 'sleep 600', gpus: '2' });
      await page.getByRole('heading', { name: /holder/ }).waitFor();
      const holder = page.url();
      await page.locator('.state', { hasText: 'running' }).first().waitFor({ timeout: 15_000 });
      await submit(page, { name: 'waiter', command: 'sleep 1', gpus: '2' });
      await page.getByRole('heading', { name: /waiter/ }).waitFor();
      const waiter = page.url();
      // The holder runs at least its 15-minute minimum, so the waiter starts about then.
      const estimate = page.getByRole('note', { name: 'Estimated start' });
      await estimate.waitFor({ timeout: 15_000 });
      assert.match(
        await estimate.textContent(),
        /^Estimated start: about (\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d UTC \(in 1[45] min( \d+ s)?\), estimated by running the scheduler forward/,
      );

      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Queue' }).click();
      await page.getByRole('heading', { name: 'Queue' }).waitFor();
      await page.getByRole('columnheader', { name: 'Estimated start' }).waitFor();
      const row = page.getByRole('row', { name: /waiter/ });
      assert.match(await row.textContent(), /~(\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d UTC \(in 1[45] min( \d+ s)?\)/);

      for (const url of [waiter, holder]) {
        await page.goto(url);
        await waitForHydration(page);
        await page.getByRole('button', { name: 'Cancel workload' }).click();
        await page.getByRole('group', { name: 'Confirm cancelling' }).getByRole('button', { name: 'Yes, cancel it' }).click();
        await page.locator('.state', { hasText: 'cancelled' }).first().waitFor({ timeout: 15_000 });
      }
    });
  });

  test('the state filter says what each state holds, and an empty result says why', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'root', 'root-password-1');
      await page.getByRole('heading', { name: 'Welcome, root' }).waitFor();
      await page.goto(`${server.url}/workloads`);
      await waitForHydration(page);
      await page.getByText('No workloads here yet.').waitFor();
      await page.getByLabel('State').selectOption({ label: 'Preempted and ended (not resumable)' });
      await page.getByText(/No workloads ended by preemption\. Resumable work that was preempted goes back to the queue/).waitFor();
      assert.equal(await page.getByText('Submit your first workload').count(), 0);
    });
  });

  test('cancelling asks first, and "Keep it" keeps it', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'ada', 'ada-password-1');
      await page.getByRole('heading', { name: 'Welcome, ada' }).waitFor();
      await submit(page, { name: 'second-thoughts', command: 'sleep 300', minRuntime: '0' });
      await page.getByRole('heading', { name: /second-thoughts/ }).waitFor();
      await waitForHydration(page);
      await page.getByRole('button', { name: 'Cancel workload' }).click();
      const confirm = page.getByRole('group', { name: 'Confirm cancelling' });
      await confirm.getByText(/Cancel second-thoughts\?/).waitFor();
      await confirm.getByRole('button', { name: 'Keep it' }).click();
      await page.getByRole('button', { name: 'Cancel workload' }).waitFor();
      assert.equal(await confirm.isVisible(), false);
      await page.getByRole('button', { name: 'Cancel workload' }).click();
      await confirm.getByRole('button', { name: 'Yes, cancel it' }).click();
      await page.locator('.state', { hasText: 'cancelled' }).first().waitFor({ timeout: 15_000 });
    });
  });

  test('an admin cordons a node from the Nodes page', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'root', 'root-password-1');
      await page.getByRole('heading', { name: 'Welcome, root' }).waitFor();
      await page.goto(`${server.url}/nodes`);
      await waitForHydration(page);
      const node = page.getByRole('region', { name: 'Node n1' });
      await node.locator('.health', { hasText: 'healthy' }).waitFor();
      const totals = page.getByRole('region', { name: 'Totals' });
      await totals.getByText(/^\d of 2 GPUs busy on 1 node\.$/).waitFor();
      await totals.getByRole('list', { name: 'What the GPU colours mean' }).getByText('free work (interruptible)').waitFor();
      // Only the actions that change something are offered, and each asks first.
      const actions = node.getByRole('group', { name: 'Actions for n1' });
      assert.equal(await actions.getByRole('button', { name: 'Uncordon n1', exact: true }).count(), 0);
      await actions.getByRole('button', { name: 'Drain n1', exact: true }).click();
      await node.getByRole('group', { name: 'Confirm: Drain n1' }).getByText(/preempted as its minimum runtime ends/).waitFor();
      await node.getByRole('button', { name: 'Keep it as it is' }).click();
      assert.equal(await node.getByRole('group', { name: 'Confirm: Drain n1' }).count(), 0);
      await node.locator('.health', { hasText: 'healthy' }).waitFor();
      await actions.getByRole('button', { name: 'Cordon n1', exact: true }).click();
      await node.getByRole('button', { name: 'Yes, cordon n1' }).click();
      await node.locator('.health', { hasText: 'cordoned' }).waitFor();
      await totals.getByText('No node takes new work: 1 node out of service.', { exact: true }).waitFor();
      assert.equal(await actions.getByRole('button', { name: 'Cordon n1', exact: true }).count(), 0);
      await actions.getByRole('button', { name: 'Uncordon n1', exact: true }).click();
      await node.getByRole('button', { name: 'Yes, uncordon n1' }).click();
      await node.locator('.health', { hasText: 'healthy' }).waitFor();
    });
  });

  test("draining a node says when its last protected workload leaves, and that workload's page tells its owner", async (t) => {
    const admin = await browser.newContext();
    const adminPage = await admin.newPage();
    try {
      await withPage(browser, t, async (page) => {
        await signIn(page, server.url, 'ada', 'ada-password-1');
        await page.getByRole('heading', { name: 'Welcome, ada' }).waitFor();
        await submit(page, { name: 'long-train', command: 'sleep 600', minRuntime: '1h' });
        await page.getByRole('heading', { name: /long-train/ }).waitFor();
        const workloadUrl = page.url();
        await page.locator('.state', { hasText: 'running' }).first().waitFor({ timeout: 15_000 });

        await signIn(adminPage, server.url, 'root', 'root-password-1');
        await adminPage.getByRole('heading', { name: 'Welcome, root' }).waitFor();
        await adminPage.goto(`${server.url}/nodes`);
        await waitForHydration(adminPage);
        const node = adminPage.getByRole('region', { name: 'Node n1' });
        await node.getByRole('group', { name: 'Actions for n1' }).getByRole('button', { name: 'Drain n1', exact: true }).click();
        await node.getByRole('button', { name: 'Yes, drain n1' }).click();
        await node.locator('.health', { hasText: 'draining' }).waitFor();
        const note = node.getByRole('note', { name: 'Drain of n1' });
        await note.getByText(/^Draining: empty by (\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d UTC/).waitFor();
        assert.match(await note.textContent(), /The last protected workload to leave is long-train \(ai\/olmo, ada's\), at (\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d UTC/);

        // The owner reads it on the workload's page: when it stops, and what happens then.
        await page.goto(workloadUrl);
        const told = page.getByRole('note', { name: 'Its node is being drained' });
        await told.getByText('Its node n1 is being drained.').waitFor();
        assert.match(await told.textContent(), /taken out of service by an admin; this workload will be stopped at (\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d UTC when its minimum runtime ends, then it waits in the queue again/);
        if (process.env.HOURGLASS_SHOTS) {
          await adminPage.screenshot({ path: `${process.env.HOURGLASS_SHOTS}/nodes-draining.png`, fullPage: true });
          await page.screenshot({ path: `${process.env.HOURGLASS_SHOTS}/workload-draining.png`, fullPage: true });
        }

        // Back in service, the note goes; the workload is cancelled so later tests have the GPUs.
        await node.getByRole('group', { name: 'Actions for n1' }).getByRole('button', { name: 'Uncordon n1', exact: true }).click();
        await node.getByRole('button', { name: 'Yes, uncordon n1' }).click();
        await node.locator('.health', { hasText: 'healthy' }).waitFor();
        assert.equal(await node.getByRole('note', { name: 'Drain of n1' }).count(), 0);
        await page.reload();
        await waitForHydration(page);
        assert.equal(await page.getByRole('note', { name: 'Its node is being drained' }).count(), 0);
        await page.getByRole('button', { name: 'Cancel workload' }).click();
        await page.getByRole('group', { name: 'Confirm cancelling' }).getByRole('button', { name: 'Yes, cancel it' }).click();
        await page.locator('.state', { hasText: 'cancelled' }).first().waitFor({ timeout: 15_000 });
      });
    } finally {
      await admin.close();
    }
  });
});
