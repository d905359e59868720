// Page weight: what a first and a second visit cost in bytes, against the release build
// (scripts/test.sh builds it with --split --precompress and runs this file after the browser tests).
// Bytes on the wire are the budget (they do not depend on the machine's speed); time to
// interactive with the CPU throttled 4x is measured and printed, not asserted.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { TestServer } from '../support/server.mjs';
import { launchBrowser } from '../support/browser.mjs';

const KB = 1000;
const BUDGET = { '/login': 400 * KB, '/workloads': 400 * KB, '/reports': 800 * KB };
/** Files of the site: a second visit must take every one of them from the browser's cache. */
const SITE_FILE = /^\/(pkg|assets)\/|^\/favicon\.ico$/;

/**
 * Records every response of `page` through the DevTools protocol: its path, bytes on the
 * wire (headers included, as compressed) and whether the cache answered it.
 */
async function recordTransfers(page) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  const requests = new Map();
  const entry = (id) => {
    if (!requests.has(id)) requests.set(id, { bytes: 0, fromCache: false });
    return requests.get(id);
  };
  cdp.on('Network.requestWillBeSent', (e) => Object.assign(entry(e.requestId), { url: e.request.url }));
  cdp.on('Network.requestServedFromCache', (e) => { entry(e.requestId).fromCache = true; });
  cdp.on('Network.responseReceived', (e) => {
    const r = entry(e.requestId);
    r.mime = e.response.mimeType;
    r.encoding = e.response.headers['content-encoding'] || e.response.headers['Content-Encoding'] || '';
    if (e.response.fromDiskCache || e.response.fromMemoryCache || e.response.fromPrefetchCache) r.fromCache = true;
  });
  cdp.on('Network.loadingFinished', (e) => { entry(e.requestId).bytes = e.encodedDataLength; });
  return {
    take() {
      const list = [...requests.values()]
        .filter((r) => r.url && !r.url.startsWith('data:') && r.mime !== 'text/event-stream')
        .map((r) => ({ ...r, path: new URL(r.url).pathname }));
      requests.clear();
      return list;
    },
  };
}

function describeTransfers(list) {
  return list
    .map((r) => `  ${String(r.bytes).padStart(9)} B  ${r.fromCache ? 'cache' : (r.encoding || 'plain').padEnd(5)}  ${r.path}`)
    .join('\n');
}

const total = (list) => list.reduce((sum, r) => sum + (r.fromCache ? 0 : r.bytes), 0);

/** Opens `url` and waits until the page is hydrated and nothing more is loading. */
async function visit(page, url) {
  await page.goto(url, { waitUntil: 'networkidle' });
  await page.locator('html[data-hydrated="true"]').waitFor({ state: 'attached', timeout: 30_000 });
  await page.waitForLoadState('networkidle');
}

describe('page weight (release build)', () => {
  let server;
  let browser;
  let cookies;

  before(async () => {
    server = await TestServer.start({ serveArgs: ['--demo'] });
    browser = await launchBrowser();
    // A signed-in session to copy into cold contexts.
    const context = await browser.newContext();
    const response = await context.request.post(`${server.url}/login`, {
      form: { username: 'lee', password: 'hourglass-demo' },
      headers: { origin: server.url },
      maxRedirects: 0,
    });
    assert.ok(response.status() < 400, `sign-in answered ${response.status()}`);
    cookies = await context.cookies();
    assert.ok(cookies.length > 0, 'signing in set a session cookie');
    await context.close();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  for (const path of Object.keys(BUDGET)) {
    test(`a first visit to ${path} transfers at most ${BUDGET[path] / KB} KB, compressed`, async () => {
      const context = await browser.newContext();
      if (path !== '/login') await context.addCookies(cookies);
      const page = await context.newPage();
      const transfers = await recordTransfers(page);
      await visit(page, `${server.url}${path}`);
      const list = transfers.take();
      const bytes = total(list);
      console.log(`first visit to ${path}: ${(bytes / KB).toFixed(1)} KB\n${describeTransfers(list)}`);
      for (const r of list.filter((r) => SITE_FILE.test(r.path) && r.bytes > 1000)) {
        assert.match(r.encoding, /^(br|gzip)$/, `${r.path} was sent uncompressed`);
      }
      assert.ok(bytes <= BUDGET[path], `${path}: ${bytes} B over the ${BUDGET[path]} B budget`);
      await context.close();
    });
  }

  test('a second visit transfers the page alone: every file comes from the cache', async () => {
    const context = await browser.newContext();
    await context.addCookies(cookies);
    const page = await context.newPage();
    const transfers = await recordTransfers(page);
    await visit(page, `${server.url}/reports`);
    const first = new Set(transfers.take().map((r) => r.path));
    await visit(page, `${server.url}/reports`);
    const list = transfers.take();
    console.log(`second visit to /reports: ${(total(list) / KB).toFixed(1)} KB\n${describeTransfers(list)}`);
    const files = list.filter((r) => SITE_FILE.test(r.path));
    assert.ok(files.length >= 3, `the page loaded its files (${files.map((r) => r.path)})`);
    const fetched = files.filter((r) => !r.fromCache);
    assert.deepEqual(
      fetched.map((r) => `${r.path}${first.has(r.path) ? '' : ' (not loaded on the first visit)'}`),
      [],
      'files fetched again on the second visit',
    );
    await context.close();
  });

  test('time to interactive on /workloads with the CPU throttled 4x (measured, not asserted)', async () => {
    for (const cache of ['cold', 'warm']) {
      const context = await browser.newContext();
      await context.addCookies(cookies);
      // The moment the page marks itself hydrated, on the page's own clock (0 = navigation start).
      await context.addInitScript(() => {
        new MutationObserver((_, observer) => {
          if (document.documentElement?.dataset.hydrated === 'true') {
            window.__hydratedAt = performance.now();
            observer.disconnect();
          }
        }).observe(document, { attributes: true, subtree: true, attributeFilter: ['data-hydrated'] });
      });
      const page = await context.newPage();
      if (cache === 'warm') await visit(page, `${server.url}/workloads`);
      const cdp = await context.newCDPSession(page);
      await cdp.send('Emulation.setCPUThrottlingRate', { rate: 4 });
      await visit(page, `${server.url}/workloads`);
      const hydratedAt = await page.evaluate(() => window.__hydratedAt);
      // Interactive: the form answers input (the state filter narrows the list client-side).
      await page.getByLabel('State').selectOption('queued');
      assert.equal(await page.getByLabel('State').inputValue(), 'queued');
      console.log(`time to interactive on /workloads, 4x CPU throttling, ${cache} cache: ${Math.round(hydratedAt)} ms (target 1500 ms)`);
      assert.ok(hydratedAt > 0, 'the page recorded when it was hydrated');
      await context.close();
    }
  });
});
