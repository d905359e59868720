// The quarterly review: picker, headline, drill-down.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { TestServer } from '../support/server.mjs';
import { launchBrowser, signIn, waitForHydration, withPage } from '../support/browser.mjs';

describe('reports', () => {
  let server;
  let browser;

  before(async () => {
    server = await TestServer.start();
    server.createUser('lee', 'leadership', 'lee-password-1');
    server.importTree('[shares]\n"ai" = 1\n"ai/olmo" = 3\n"ai/molmo" = 1\n');
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  test('leadership picks a quarter and drills down the tree', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'lee', 'lee-password-1');
      await page.getByRole('heading', { name: 'Welcome, lee' }).waitFor();
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Reports' }).click();
      await page.getByRole('heading', { name: /^Quarterly review/ }).waitFor();
      await waitForHydration(page);
      const headline = page.getByRole('region', { name: 'Headline figures' });
      await headline.getByText('Delivered / owed').waitFor();
      const olmo = page.locator('tr', { has: page.getByRole('rowheader', { name: 'olmo', exact: true }) });
      await olmo.waitFor();
      assert.match(await olmo.textContent(), /75\.0%/);
      // A server started minutes ago has too little funded time to explain any shortfall.
      assert.equal(await page.getByRole('heading', { name: /received less than their share/ }).count(), 0);
      // The trend needs an earlier quarter with data; this server started today.
      await page.getByRole('region', { name: 'Quarter over quarter' })
        .getByText('Nothing was recorded before this quarter, so there is no trend yet.').waitFor();
      await page.getByRole('button', { name: 'Expand or collapse ai' }).click();
      await olmo.waitFor({ state: 'hidden' });
      // Only years with data are offered (this server started today; the review has loaded, so
      // the page knows), and no quarter to come.
      const now = new Date();
      const years = page.getByLabel('Year', { exact: true }).locator('option');
      assert.deepEqual(await years.allTextContents(), [String(now.getFullYear())]);
      const thisQuarter = Math.floor(now.getMonth() / 3) + 1;
      for (let q = 1; q <= 4; q++) {
        const option = page.getByLabel('Quarter', { exact: true }).locator(`option[value="${q}"]`);
        assert.equal(await option.isDisabled(), q > thisQuarter, `Q${q}`);
      }
      await page.getByLabel('Quarter', { exact: true }).selectOption('1');
      await page.getByText(/^Q1 \d{4}: per program and project/).waitFor();
      // The quarter is in the URL and the heading (what a print or a shared link shows).
      const url = new URL(page.url());
      assert.equal(url.searchParams.get('quarter'), '1');
      assert.equal(url.searchParams.get('year'), String(now.getFullYear()));
      await page.getByRole('heading', { name: `Quarterly review: Q1 ${now.getFullYear()}` }).waitFor();
      assert.ok(await page.getByRole('link', { name: 'Export CSV (per day)' }).getAttribute('href'));
      assert.equal(
        await page.getByRole('link', { name: 'Export this table (CSV)' }).getAttribute('href'),
        `/api/v1/reports/quarter.csv?year=${now.getFullYear()}&quarter=1`,
      );
      // Every quarter so far in turn and back to the first: each shows its own review, and the
      // people table of the quarter shown answers (the page keeps the two latest quarters' data).
      for (const q of [...Array(thisQuarter).keys()].map((i) => i + 1).concat([1])) {
        await page.getByLabel('Quarter', { exact: true }).selectOption(String(q));
        await page.getByText(new RegExp(`^Q${q} \\d{4}: per program and project`)).waitFor();
      }
      const quarterPeople = page.getByRole('region', { name: 'Who used the time' });
      await quarterPeople.getByLabel('Program or project').selectOption('ai/molmo');
      await quarterPeople.getByText("Nobody's work ran under ai/molmo in this period.").waitFor();
      // Opening that link directly shows that quarter.
      await page.goto(`${server.url}/reports?year=${now.getFullYear()}&quarter=1`);
      await page.getByText(/^Q1 \d{4}: per program and project/).waitFor();
      // Any period: from a day to a day, both included.
      await waitForHydration(page);
      const day = (d) => d.toISOString().slice(0, 10);
      const from = day(new Date(Date.now() - 6 * 86_400_000));
      const to = day(new Date());
      await page.getByLabel('From', { exact: true }).fill(from);
      await page.getByLabel('To (included)').fill(to);
      await page.getByRole('button', { name: 'Show period' }).click();
      await page.getByRole('heading', { name: `Review: ${from} to ${to}` }).waitFor();
      await page.getByText(`${from} to ${to}: per program and project`).waitFor();
      await page.locator('tr', { has: page.getByRole('rowheader', { name: 'olmo', exact: true }) }).waitFor();
      assert.match(
        await page.getByRole('link', { name: 'Export this table (CSV)' }).getAttribute('href'),
        /^\/api\/v1\/reports\/review\.csv\?from=\d+&to=\d+$/,
      );
      // Who used a project's time (nobody ran work on this server: its empty state). The form
      // loaded a new page: its controls answer once it is hydrated.
      await waitForHydration(page);
      const people = page.getByRole('region', { name: 'Who used the time' });
      await people.getByLabel('Program or project').selectOption('ai/olmo');
      await people.getByText("Nobody's work ran under ai/olmo in this period.").waitFor();
      // A period that ends before it starts says so.
      await page.goto(`${server.url}/reports?from=${to}&to=${from}`);
      await page.getByRole('alert').filter({ hasText: 'the period must end after it starts' }).waitFor();
    });
  });
});
