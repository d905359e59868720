// Starts the real `hourglass` binary on a fresh SQLite database and a free port.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const BIN = process.env.HOURGLASS_BIN;
const SITE_ROOT = process.env.HOURGLASS_SITE_ROOT;

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

export class TestServer {
  /** `serveArgs`: extra arguments to `hourglass serve`, e.g. `['--demo']`. */
  static async start({ serveArgs = [] } = {}) {
    if (!BIN || !SITE_ROOT) {
      throw new Error('HOURGLASS_BIN and HOURGLASS_SITE_ROOT must be set (scripts/test.sh sets them)');
    }
    const dir = mkdtempSync(join(tmpdir(), 'hourglass-e2e-'));
    const server = new TestServer(dir, await freePort(), serveArgs);
    await server.#spawn();
    return server;
  }

  constructor(dir, port, serveArgs = []) {
    this.dir = dir;
    this.serveArgs = serveArgs;
    this.port = port;
    this.url = `http://127.0.0.1:${port}`;
    this.env = {
      ...process.env,
      HOURGLASS_DATABASE_URL: `sqlite://${join(dir, 'hourglass.db')}`,
      HOURGLASS_SITE_ROOT: SITE_ROOT,
      HOURGLASS_ADDR: `127.0.0.1:${port}`,
    };
    this.log = '';
    this.agents = [];
  }

  /** Runs `hourglass ARGS…` on this server's database, exactly as an operator would. */
  cli(args, input = '') {
    const result = spawnSync(BIN, args, { env: this.env, input, encoding: 'utf8' });
    if (result.status !== 0) {
      throw new Error(`hourglass ${args.join(' ')} failed: ${result.stderr}`);
    }
    return result.stdout;
  }

  createUser(username, role, password) {
    this.cli(['admin', 'create-user', '--username', username, '--role', role, '--password-stdin'], `${password}\n`);
  }

  importTree(toml) {
    const file = join(this.dir, 'org.toml');
    writeFileSync(file, toml);
    this.cli(['admin', 'import-tree', file]);
  }

  /** A new API token for `username`, made with the CLI as an operator would. */
  apiToken(username) {
    return this.cli(['admin', 'create-token', '--username', username]).trim().split('\n').pop();
  }

  /** POSTs `body` as JSON to the API with `token`; fails the test unless it succeeds; the answer. */
  async postJson(token, path, body) {
    const response = await fetch(`${this.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`POST ${path}: ${response.status} ${text}`);
    return JSON.parse(text);
  }

  /** Registers a node in `cluster` and starts a real agent for it with `gpus` simulated GPUs. */
  async startAgent(name, gpus, cluster = 'default') {
    const token = this.cli(['admin', 'register-node', '--name', name, '--cluster', cluster]).trim().split('\n').pop();
    const stateDir = join(this.dir, `agent-${name}`);
    const agent = spawn(BIN, ['agent', '--server', this.url, '--name', name, '--cluster', cluster, '--gpus', String(gpus), '--token', token, '--state-dir', stateDir], {
      env: { ...this.env, HOURGLASS_LOG: 'warn' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    agent.stderr.on('data', (chunk) => { this.log += chunk.toString(); });
    // Made at once, so that an agent a test stops (or that dies) is not waited for twice.
    agent.exited = new Promise((resolve) => agent.once('exit', resolve));
    this.agents.push(agent);
  }

  async #spawn() {
    this.process = spawn(BIN, ['serve', '--heartbeat-deadline-s', '6', '--grace-s', '1', ...this.serveArgs], { env: this.env, stdio: ['ignore', 'pipe', 'pipe'] });
    const collect = (chunk) => { this.log += chunk.toString(); };
    this.process.stdout.on('data', collect);
    this.process.stderr.on('data', collect);
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      if (this.process.exitCode !== null) {
        throw new Error(`hourglass serve exited early:\n${this.log}`);
      }
      try {
        const response = await fetch(`${this.url}/healthz`);
        if (response.ok) return;
      } catch { /* not listening yet */ }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`hourglass serve did not answer /healthz within 60 s:\n${this.log}`);
  }

  async stop() {
    for (const agent of this.agents) {
      if (agent.exitCode === null) agent.kill('SIGTERM');
    }
    // An agent ends its runs and writes its state directory as it stops: the directory goes only
    // once every agent has exited (removing it meanwhile once failed with ENOTEMPTY).
    await Promise.all(this.agents.map((agent) => agent.exited));
    if (this.process && this.process.exitCode === null) {
      const exited = new Promise((resolve) => this.process.once('exit', resolve));
      this.process.kill('SIGTERM');
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
