// The simulator lab: uploads with a bad file, a run of both policies with progress, the summary,
// the charts and the Gantt chart's zoom.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { TestServer } from '../support/server.mjs';
import { launchBrowser, signIn, waitForHydration, withPage } from '../support/browser.mjs';

describe('simulator lab', () => {
  let server;
  let browser;
  let inputs;

  before(async () => {
    server = await TestServer.start();
    server.createUser('lee', 'leadership', 'lee-password-1');
    server.createUser('ada', 'researcher', 'ada-password-1');
    inputs = join(server.dir, 'scenario');
    server.cli(['simulate', 'scenario', '--seed', '2', '--days', '1', '--out-dir', inputs]);
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  test('researchers are not offered the lab', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'ada', 'ada-password-1');
      await page.getByRole('heading', { name: 'Welcome, ada' }).waitFor();
      const nav = page.getByRole('navigation', { name: 'Main' });
      await nav.getByRole('link', { name: 'Reports' }).waitFor();
      assert.equal(await nav.getByRole('link', { name: 'Lab' }).count(), 0);
      await page.goto(`${server.url}/lab`);
      await page.getByText('Only leadership and administrators can use the simulator lab.').waitFor();
    });
  });

  test('leadership uploads files, runs the three policies and zooms the Gantt charts side by side', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'lee', 'lee-password-1');
      await page.getByRole('heading', { name: 'Welcome, lee' }).waitFor();
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Lab' }).click();
      await page.getByRole('heading', { name: 'Simulator lab' }).waitFor();
      await waitForHydration(page);
      await page.getByLabel(/^Upload a tree, a cluster and a trace/).check();

      // A trace with a broken last line is refused, naming the file and line.
      const broken = join(server.dir, 'broken.csv');
      const trace = readFileSync(join(inputs, 'trace.csv'), 'utf8');
      writeFileSync(broken, `${trace}not,a,row\n`);
      await page.getByLabel('Budget tree (TOML)').setInputFiles(join(inputs, 'tree.toml'));
      await page.getByLabel('Cluster (TOML)').setInputFiles(join(inputs, 'cluster.toml'));
      await page.getByLabel('Trace (CSV)').setInputFiles(broken);
      await page.getByRole('button', { name: 'Run the three policies' }).click();
      const lines = trace.trimEnd().split('\n').length;
      await page.locator('#trace-error').getByText(`The trace file: line ${lines + 1}`).waitFor();

      await page.getByLabel('Trace (CSV)').setInputFiles(join(inputs, 'trace.csv'));
      await page.getByRole('button', { name: 'Run the three policies' }).click();
      await page.waitForURL(/\/lab\/\d+$/);
      await page.getByRole('heading', { name: /^Uploaded files \(\d+ workloads on 1024 GPUs\)/ }).waitFor();
      const summary = page.getByRole('table', { name: /Summary/ });
      await summary.waitFor({ timeout: 60_000 });
      const overall = summary.getByRole('row', { name: /Delivered \/ owed, overall/ });
      assert.match(await overall.textContent(), /\d+\.\d% *\d+\.\d% *\d+\.\d%/);
      // Each measure says in words which policy does better, and by how much.
      assert.match(
        await overall.textContent(),
        /(Fair share|The priority baseline) is better by \d+\.\d points of what teams were owed|About the same under both/,
      );
      const demand = summary.getByRole('row', { name: /Demand \/ capacity/ });
      assert.match(await demand.textContent(), /The same input for all: its workloads ask for \d+\.\d\d× the GPU time/);
      await page.getByRole('heading', { name: 'Wait distributions' }).waitFor();
      await page.getByRole('heading', { name: 'Delivered / owed per team' }).waitFor();
      await page.locator('#lab-waits-1 canvas').waitFor({ timeout: 20_000 });

      const gantt = page.getByRole('img', { name: /^Runs on the first 32 GPUs under fair share/ });
      await gantt.waitFor();
      assert.ok((await gantt.locator('g.gantt-bar').count()) > 0, 'bars are drawn');
      // A one-day run is shown whole; zooming in shows its middle half, panning moves it.
      const whole = (await gantt.getAttribute('aria-label')).match(/d0 00:00 to (d[01] \d\d:\d\d)/);
      assert.ok(whole, 'the whole run is shown first');
      const window = page.locator('.gantt-window');
      await page.getByRole('button', { name: 'Zoom in' }).click();
      await page.getByRole('img', { name: /^Runs on the first 32 GPUs under fair share, d0 0[56]:\d\d to d0 1[78]:\d\d/ }).waitFor();
      await page.getByRole('button', { name: 'Earlier' }).click();
      await page.getByRole('img', { name: /fair share, d0 00:00 to d0 1[12]:\d\d/ }).waitFor();
      assert.match(await window.textContent(), /^Showing d0 00:00 to d0 1[12]:\d\d$/);
      await page.getByRole('button', { name: 'Whole run' }).click();
      await page.getByRole('img', { name: new RegExp(`fair share, d0 00:00 to ${whole[1]}`) }).waitFor();
      // The SLURM peer is drawn beside fair share on the same GPUs and window; either side can
      // show any of the three policies.
      const slurm = page.getByRole('img', { name: new RegExp(`^Runs on the first 32 GPUs under the SLURM peer, d0 00:00 to ${whole[1]}`) });
      await slurm.waitFor();
      assert.ok((await slurm.locator('g.gantt-bar').count()) > 0, 'the SLURM peer has bars too');
      await page.getByLabel('Left', { exact: true }).selectOption('priority');
      const baseline = page.getByRole('img', { name: /^Runs on the first 32 GPUs under the priority baseline, / });
      await baseline.waitFor();
      assert.ok((await baseline.locator('g.gantt-bar').count()) > 0, 'the baseline has bars too');
      // Each measure also says whether fair share or the SLURM peer does better.
      assert.match(
        await overall.textContent(),
        /(Fair share|The SLURM peer) is better by \d+\.\d points of what teams were owed|About the same under both/,
      );
    });
  });

  test('recent runs list their settings and figures, and two finished runs compare side by side', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'lee', 'lee-password-1');
      await page.getByRole('heading', { name: 'Welcome, lee' }).waitFor();
      for (const window of ['7d', '2d']) {
        await page.goto(`${server.url}/lab`);
        await waitForHydration(page);
        await page.getByLabel('Seed', { exact: true }).fill('4');
        await page.getByLabel('Days to simulate').fill('1');
        await page.getByLabel('Usage lookback window').fill(window);
        await page.getByRole('button', { name: 'Run the three policies' }).click();
        await page.waitForURL(/\/lab\/\d+$/);
        await page.getByRole('table', { name: /Summary/ }).waitFor({ timeout: 60_000 });
      }
      await page.goto(`${server.url}/lab`);
      await waitForHydration(page);
      const runs = page.getByRole('region', { name: 'Recent runs' });
      const week = runs.getByRole('row', { name: /seed 4, 1 day.*7 d lookback window, minimum runtimes capped at 8 h/ });
      const twoDays = runs.getByRole('row', { name: /seed 4, 1 day.*2 d lookback window/ });
      assert.match(await week.textContent(), /1024.*\d+.*(\d+ s|\d+ min|—) \/ .* \/ .*\d\.\d\d \/ \d\.\d\d \/ \d\.\d\d/);
      await page.getByText('Select two finished runs to compare them.').waitFor();
      await week.getByRole('checkbox').check();
      await twoDays.getByRole('checkbox').check();
      await page.getByRole('link', { name: /^Compare runs \d+ and \d+$/ }).click();
      await page.waitForURL(/\/lab\/compare\/\d+\/\d+$/);
      await page.getByRole('heading', { name: 'Compare lab runs' }).waitFor();
      const settings = page.getByRole('table', { name: 'What was simulated' });
      assert.match(await settings.getByRole('row', { name: /^Settings/ }).textContent(), /7 d lookback.*2 d lookback/);
      const measures = page.getByRole('table', { name: 'Each measure under the three policies in both runs' });
      const overall = measures.getByRole('row', { name: /Delivered \/ owed, overall/ });
      assert.match(await overall.textContent(), /(\d+\.\d%\s*){6}/);
      await page.getByRole('table', { name: /Delivered ÷ owed per team/ }).waitFor();
    });
  });
});
