// Sign-in, the admin's Users page, and refusal for everyone else — in a real browser.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { TestServer } from '../support/server.mjs';
import { launchBrowser, signIn, waitForHydration, withPage } from '../support/browser.mjs';

describe('signing in and managing users', () => {
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

  test('an admin creates a user, who signs in and is refused the Users page', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'admin', 'admin-password-1');
      await page.getByRole('heading', { name: 'Welcome, admin' }).waitFor();
      await waitForHydration(page);

      // Client-side navigation to the Users page.
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Users' }).click();
      await page.getByRole('heading', { name: 'Create a user' }).waitFor();
      assert.equal(new URL(page.url()).pathname, '/users');

      await page.getByLabel('Username').fill('rita');
      await page.getByLabel('Role').selectOption('researcher');
      await page.getByLabel('Password').fill('rita-password-1');
      await page.getByRole('button', { name: 'Create user' }).click();
      await page.getByText('Created rita (Researcher).').waitFor();
      await page.getByRole('cell', { name: 'rita', exact: true }).waitFor();

      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByText('You have signed out.').waitFor();

      await signIn(page, server.url, 'rita', 'rita-password-1');
      await page.getByRole('heading', { name: 'Welcome, rita' }).waitFor();
      const nav = page.getByRole('navigation', { name: 'Main' });
      assert.equal(await nav.getByRole('link', { name: 'Users' }).count(), 0, 'no Users link for a researcher');

      await page.goto(`${server.url}/users`);
      await page.getByText('Only administrators can manage users.').waitFor();
      assert.equal(await page.getByRole('heading', { name: 'Create a user' }).count(), 0);
      assert.deepEqual(page.errors.filter((e) => !e.includes('403')), []);
    });
  });

  test("an admin changes a user's role, then disables and re-enables them", async (t) => {
    server.createUser('sam', 'researcher', 'sam-password-1');
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'admin', 'admin-password-1');
      await page.goto(`${server.url}/users`);
      await waitForHydration(page);
      // Their own role is not theirs to change.
      assert.equal(await page.getByLabel('Role of admin', { exact: true }).count(), 0);
      await page.getByLabel('Role of sam', { exact: true }).selectOption('leadership');
      await page.getByRole('button', { name: 'Change the role of sam' }).click();
      await page.waitForFunction(() => document.querySelector('select[aria-label="Role of sam"]')?.value === 'leadership');
      await page.reload();
      await waitForHydration(page);
      assert.equal(await page.getByLabel('Role of sam', { exact: true }).inputValue(), 'leadership');
      await page.getByRole('button', { name: 'Disable sam' }).click();
      await page.getByRole('button', { name: 'Enable sam' }).click();
      await page.getByRole('button', { name: 'Disable sam' }).waitFor();
    });
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'sam', 'sam-password-1');
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Reports' }).waitFor();
    });
  });

  test('a wrong password shows one generic error and keeps the username', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'admin', 'not-the-password');
      const alert = page.getByRole('alert');
      await alert.filter({ hasText: 'did not match an active account' }).waitFor();
      assert.equal(await page.getByLabel('Username').inputValue(), 'admin');
      assert.equal(new URL(page.url()).pathname, '/login');
    });
  });

  test('a visitor sent to sign in comes back to the page they asked for', async (t) => {
    await withPage(browser, t, async (page) => {
      await page.goto(`${server.url}/users`);
      assert.equal(new URL(page.url()).pathname, '/login');
      await page.getByLabel('Username').fill('admin');
      await page.getByLabel('Password').fill('admin-password-1');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Create a user' }).waitFor();
      assert.equal(new URL(page.url()).pathname, '/users');
    });
  });

  test('a form error is shown next to its field', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'admin', 'admin-password-1');
      await page.getByRole('heading', { name: 'Welcome, admin' }).waitFor();
      await page.goto(`${server.url}/users`);
      await waitForHydration(page);
      await page.getByLabel('Username').fill('bad name');
      await page.getByLabel('Password').fill('long-enough-1');
      await page.getByRole('button', { name: 'Create user' }).click();
      const error = page.locator('#new-username-error');
      await error.filter({ hasText: "not ' '" }).waitFor();
      assert.equal(await page.getByLabel('Username').getAttribute('aria-describedby'), 'new-username-error');
    });
  });

  test('an unknown address shows the not-found page', async (t) => {
    await withPage(browser, t, async (page) => {
      await signIn(page, server.url, 'admin', 'admin-password-1');
      await page.getByRole('heading', { name: 'Welcome, admin' }).waitFor();
      const response = await page.goto(`${server.url}/nowhere`);
      assert.equal(response.status(), 404);
      await page.getByRole('heading', { name: 'Page not found' }).waitFor();
    });
  });
});
