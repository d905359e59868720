// Debian's Chromium driven by playwright-core, with screenshots on failure and a record of
// every console error and uncaught page error (a page that fails to hydrate shows up here).
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const RESULTS = join(dirname(fileURLToPath(import.meta.url)), '..', 'test-results');

export async function launchBrowser() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** A fresh browser context (its own cookies) with a page that records errors. */
export async function newPage(browser) {
  const context = await browser.newContext();
  const page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (error) => page.errors.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') page.errors.push(`console error: ${message.text()}`);
  });
  return page;
}

/** Runs `body(page)`; on failure saves a screenshot named after the test, then rethrows. */
export async function withPage(browser, t, body) {
  const page = await newPage(browser);
  try {
    await body(page);
  } catch (error) {
    mkdirSync(RESULTS, { recursive: true });
    const file = join(RESULTS, `${t.name.replace(/[^a-z0-9]+/gi, '-')}.png`);
    await page.screenshot({ path: file, fullPage: true }).catch(() => {});
    error.message += `\n(screenshot: ${file}; page errors: ${JSON.stringify(page.errors)})`;
    throw error;
  } finally {
    await page.context().close();
  }
}

/** Waits until the WASM bundle has hydrated the page, so client-side behaviour is under test. */
export async function waitForHydration(page) {
  await page.locator('html[data-hydrated="true"]').waitFor({ state: 'attached', timeout: 20_000 });
}

export async function signIn(page, baseUrl, username, password) {
  await page.goto(`${baseUrl}/login`);
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}
