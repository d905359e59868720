// Charts on the Reports page, drawn in the browser by charming (ECharts), on a server with a month
// of demo usage history.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TestServer } from '../support/server.mjs';
import { launchBrowser, signIn, waitForHydration, withPage } from '../support/browser.mjs';

const RESULTS = join(dirname(fileURLToPath(import.meta.url)), '..', 'test-results');

/** Whether `container` holds a canvas with a size that differs from a blank one of that size. */
async function canvasIsDrawn(container) {
  return container.evaluate((element) => {
    const canvas = element.querySelector('canvas');
    if (!canvas || canvas.width === 0 || canvas.height === 0) return false;
    const blank = document.createElement('canvas');
    blank.width = canvas.width;
    blank.height = canvas.height;
    return canvas.toDataURL() !== blank.toDataURL();
  });
}

async function waitForChart(page, container) {
  await container.locator('canvas').first().waitFor({ timeout: 20_000 });
  // ECharts animates its first frame; wait until something is painted.
  await page.waitForFunction(
    (element) => {
      const canvas = element.querySelector('canvas');
      if (!canvas || canvas.width === 0) return false;
      const blank = document.createElement('canvas');
      blank.width = canvas.width;
      blank.height = canvas.height;
      return canvas.toDataURL() !== blank.toDataURL();
    },
    await container.elementHandle(),
    { timeout: 20_000 },
  );
  assert.ok(await canvasIsDrawn(container));
}

describe('charts', () => {
  let server;
  let browser;

  before(async () => {
    server = await TestServer.start({ serveArgs: ['--demo'] });
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  test('the reports page draws the occupancy and allocation charts and charts a chosen node', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'lee', 'hourglass-demo');
      await page.getByRole('heading', { name: 'Welcome, lee' }).waitFor();
      assert.equal(await page.locator('script[src="/assets/echarts-5.6.0-hourglass.min.js"]').count(), 0, 'no echarts outside chart pages');

      await page.goto(`${server.url}/reports`);
      await waitForHydration(page);
      const overview = page.getByRole('region', { name: 'Cluster occupancy' });
      const allocation = page.getByRole('region', { name: 'Allocation vs delivered' });
      const overviewChart = overview.getByRole('img', { name: /^Cluster occupancy/ });
      const allocationChart = allocation.getByRole('img', { name: /^GPU-hours per day for the cluster/ });
      await waitForChart(page, overviewChart);
      await waitForChart(page, allocationChart);
      assert.match(await overview.locator('figcaption').textContent(), /% of healthy GPU-hours busy/);
      assert.match(await allocation.locator('figcaption').textContent(), /Delivered by child: /);
      await overview.getByText('Loading chart…').waitFor({ state: 'hidden' });

      // The demo runs two clusters: the review gives each one's headline beside the total.
      const clusters = page.getByRole('table', { name: /^Each cluster/ });
      await clusters.getByRole('rowheader', { name: 'h100' }).waitFor();
      await clusters.getByRole('rowheader', { name: 'b200' }).waitFor();

      // The cluster activity: queue depth, waits and preemptions, per day, then per week.
      const activity = page.getByRole('region', { name: 'Cluster activity' });
      await waitForChart(page, activity.getByRole('img', { name: /^Workloads waiting per day/ }));
      await waitForChart(page, activity.getByRole('img', { name: /^Wait before the first start per day/ }));
      await activity.getByRole('img', { name: /^(Preemptions and drains by reason|No preemptions or drains)/ }).waitFor();
      await activity.getByLabel('Per', { exact: true }).selectOption('week');
      await waitForChart(page, activity.getByRole('img', { name: /^Workloads waiting per week/ }));
      // The allocation chart states the chosen node's usage ratio beside it.
      await allocation.getByText(/^Usage ratio of cluster over the lookback window: \d/).waitFor();

      // Pick a program in the node picker: its chart replaces the cluster's.
      const program = await page.getByLabel('Node', { exact: true }).locator('option').nth(1).getAttribute('value');
      await page.getByLabel('Node', { exact: true }).selectOption(program);
      const name = program.split('/').pop();
      const programChart = allocation.getByRole('img', { name: new RegExp(`^GPU-hours per day for ${name},`) });
      await waitForChart(page, programChart);
      await allocation.getByText(new RegExp(`^(Usage ratio of ${name} over the lookback window: \\d|${name} has no allocated time)`)).waitFor();

      // Clicking a row's node charts it too.
      const leafRow = page.locator('table.review tbody tr').last();
      const leaf = (await leafRow.getByRole('button').last().textContent()).trim();
      await leafRow.getByRole('button', { name: leaf, exact: true }).click();
      await waitForChart(page, allocation.getByRole('img', { name: new RegExp(`^GPU-hours per day for ${leaf},`) }));
      assert.match(await page.getByLabel('Node', { exact: true }).inputValue(), new RegExp(`/${leaf}$`));

      // The usage charts and the usage CSV narrow to one cluster; the activity says it is of all.
      await page.getByRole('heading', { name: 'Cluster activity, every cluster' }).waitFor();
      const usageCsv = page.getByRole('link', { name: 'Export CSV (per day)' });
      assert.doesNotMatch(await usageCsv.getAttribute('href'), /cluster=/);
      await page.getByLabel('Cluster', { exact: true }).selectOption('b200');
      const onB200 = page.getByRole('region', { name: 'Cluster occupancy on b200' });
      // The headings change at once; the charts, once their cluster's series has arrived.
      await waitForChart(page, onB200.getByRole('img', { name: /^Cluster occupancy on b200 / }));
      const allocationOnB200 = page.getByRole('region', { name: 'Allocation vs delivered on b200' });
      await waitForChart(page, allocationOnB200.getByRole('img', { name: new RegExp(`^GPU-hours per day for ${leaf} on b200,`) }));
      const b200Csv = page.getByRole('link', { name: 'Export CSV of b200 (per day)' });
      assert.match(await b200Csv.getAttribute('href'), /&cluster=b200$/);
      assert.equal(await b200Csv.getAttribute('download'), 'hourglass-usage-b200.csv');

      await page.waitForTimeout(1_500); // let the bars finish growing for the picture
      mkdirSync(RESULTS, { recursive: true });
      await page.screenshot({ path: join(RESULTS, 'reports-charts.png'), fullPage: true });
      assert.deepEqual(page.errors, []);
    });
  });

  test('the budget tree page charts the last two weeks after a client-side navigation', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'lee', 'hourglass-demo');
      await page.getByRole('heading', { name: 'Welcome, lee' }).waitFor();
      await waitForHydration(page);
      // Client-side: ECharts is added to the page and loads after the chart's effect runs.
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Budget tree' }).click();
      // The demo has two clusters: the page shows the first by name, and its chart is of it.
      const recent = page.getByRole('region', { name: 'Allocation vs delivered on b200, last two weeks' });
      await waitForChart(page, recent.getByRole('img', { name: /^GPU-hours per day for the cluster/ }));
      await page.waitForTimeout(1_500);
      mkdirSync(RESULTS, { recursive: true });
      await page.screenshot({ path: join(RESULTS, 'tree-chart.png'), fullPage: true });
      assert.deepEqual(page.errors, []);
    });
  });

  test("in dark mode the charts draw light labels on the page's own dark background", async () => {
    for (const scheme of ['dark', 'light']) {
      const context = await browser.newContext({ colorScheme: scheme });
      const page = await context.newPage();
      try {
        await signIn(page, server.url, 'lee', 'hourglass-demo');
        await page.getByRole('heading', { name: 'Welcome, lee' }).waitFor();
        await page.goto(`${server.url}/reports`);
        await waitForHydration(page);
        const chart = page.getByRole('region', { name: 'Allocation vs delivered' }).getByRole('img', { name: /^GPU-hours per day/ });
        await waitForChart(page, chart);
        const look = await chart.evaluate((element) => {
          const option = window.echarts.getInstanceByDom(element).getOption();
          return { background: option.backgroundColor, legend: option.legend[0].textStyle.color, dark: option.darkMode === true };
        });
        assert.equal(look.background, 'transparent', `${scheme}: the card's colour shows through`);
        assert.equal(look.dark, scheme === 'dark', `${scheme}: ECharts' dark theme only on dark pages`);
        // Legend text: light on dark pages, dark on light ones (the sum of the RGB channels).
        let hex = look.legend.replace('#', '');
        if (hex.length === 3) hex = [...hex].map((c) => c + c).join('');
        const channels = hex.match(/../g).map((h) => parseInt(h, 16));
        const brightness = channels.reduce((a, b) => a + b, 0) / 3;
        assert.ok(scheme === 'dark' ? brightness > 140 : brightness < 100, `${scheme}: legend ${look.legend}`);
      } finally {
        await context.close();
      }
    }
  });
});
