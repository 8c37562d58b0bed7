// The dashboard in a real browser against a real local cluster (ctest entry
// "browser"; docs/dashboard.md):
//
//   node dashboard_test.mjs --drover BUILD/drover --modules DIR/node_modules
//                           --artifacts BUILD/tests/artifacts
//
// Starts `drover server` (TLS, self-signed certificate) and two `drover
// worker` processes on 127.0.0.1, each with its own state directory, then
// drives Debian's /usr/bin/chromium through playwright-core:
//   - the link the server printed (token in the URL fragment) opens the
//     dashboard, which drops the token from the address bar;
//   - the workers page shows 2 workers; drain and undrain work from the page;
//   - a worker whose health check fails shows unhealthy, with the reason;
//   - a third worker in idle-desktop mode whose owner is present shows
//     paused, with its owner note, and the summary counts it;
//   - a job submitted through the HTTP API afterwards appears on the jobs
//     page, and its tasks reach succeeded on the job page without a reload;
//   - a task's page shows its command and its live log: a line printed before
//     the test creates a file, and the line printed after it;
//   - a tab without the token shows the token form, which refuses a wrong
//     token and accepts the right one;
//   - the job's timeline highlights its critical path (from the report), and
//     the utilization page charts the server's samples;
//   - users and roles: the header names who is signed in; with a second user
//     "bo" (role user) and a viewer "vi" added through the API, and one held
//     job each for the admin and bo: each sees their own jobs first under
//     "Your jobs", then the others', newest first; bo and vi see no drain
//     button and no Users / Audit pages; bo sees Cancel on his job and its
//     task (and it works; then Retry runs it again) but not on the admin's,
//     vi on neither, the admin
//     on bo's job and on ana's task; bo opening #/audit reads the server's
//     refusal (403); a worker's token gets the token form; the admin's Audit
//     page lists bo's creation and his job, newest first, and the Users page
//     lists bo and vi; bo's page of the admin's task says its log is
//     private and shows none of it, vi's shows it;
//   - screenshots are kept in the artifacts folder (dashboard.png: the job
//     page with its timeline).
// Every wait is on an event (a printed line, text on the page) with a
// generous timeout that only bounds a failure. Exit codes: 0 passed, 1
// failed, 77 skipped (no chromium and CI is not "true").

import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';

const CHROMIUM = '/usr/bin/chromium';
const SKIP = 77;
const WAIT_MS = 60_000;

function args() {
  const out = {};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || argv[i + 1] === undefined) {
      throw new Error(`usage: dashboard_test.mjs --drover PATH --modules DIR --artifacts DIR (bad argument "${argv[i]}")`);
    }
    out[argv[i].slice(2)] = argv[i + 1];
  }
  for (const k of ['drover', 'modules', 'artifacts']) {
    if (!out[k]) throw new Error(`dashboard_test.mjs: --${k} is required`);
  }
  return out;
}

function log(...parts) {
  console.log(`[browser] ${parts.join(' ')}`);
}

// A child process whose output lines can be waited for.
class Proc {
  constructor(name, argv) {
    this.name = name;
    this.output = '';
    this.waiters = [];
    this.child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    this.exited = new Promise((resolve) => this.child.on('exit', (code, sig) => resolve({ code, sig })));
    const take = (chunk) => {
      this.output += chunk.toString();
      this.check();
    };
    this.child.stdout.on('data', take);
    this.child.stderr.on('data', take);
    this.child.on('exit', () => this.check(true));
  }

  check(exited = false) {
    this.waiters = this.waiters.filter((w) => {
      const line = this.output.split('\n').find((l) => l.includes(w.text));
      if (line !== undefined) {
        clearTimeout(w.timer);
        w.resolve(line);
        return false;
      }
      if (exited) {
        clearTimeout(w.timer);
        w.reject(new Error(`${this.name} exited before printing "${w.text}":\n${this.output}`));
        return false;
      }
      return true;
    });
  }

  waitForLine(text, ms = WAIT_MS) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(
        `${this.name} did not print "${text}" within ${ms} ms:\n${this.output}`)), ms);
      this.waiters.push({ text, resolve, reject, timer });
      this.check(this.child.exitCode !== null);
    });
  }

  async stop() {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    await this.exited;
    clearTimeout(timer);
  }
}

// The HTTP API, verifying the server's self-signed certificate against the
// copy in its state directory (it names 127.0.0.1).
function request(port, ca, token, method, target, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = https.request({
      host: '127.0.0.1', port, method, path: target, ca,
      headers: { Authorization: `Bearer ${token}`,
        ...(data ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } : {}) },
    }, (res) => {
      let text = '';
      res.on('data', (c) => { text += c; });
      res.on('end', () => {
        if (res.statusCode !== 200) return reject(new Error(`${method} ${target}: ${res.statusCode} ${text}`));
        resolve(JSON.parse(text));
      });
    });
    req.on('error', reject);
    if (data) req.write(data);
    req.end();
  });
}

async function main() {
  const opts = args();
  if (!fs.existsSync(CHROMIUM)) {
    const why = `${CHROMIUM} is missing (Debian package "chromium"; scripts/install-deps.sh installs it)`;
    if (process.env.CI === 'true') {
      console.error(`[browser] FAILED: ${why}`);
      return 1;
    }
    console.log(`[browser] SKIPPED: ${why}`);
    return SKIP;
  }
  const require = createRequire(path.join(path.resolve(opts.modules), 'noop.js'));
  const { chromium } = require('playwright-core');
  fs.mkdirSync(opts.artifacts, { recursive: true });

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'drover-browser-'));
  const procs = [];
  let context = null;
  let page = null;
  try {
    const server = new Proc('server', [opts.drover, 'server', '--bind', '127.0.0.1', '--port', '0',
      '--state-dir', `${dir}/state`, '--access-file', `${dir}/access.json`]);
    procs.push(server);
    const listening = await server.waitForLine('drover: listening on 127.0.0.1:');
    const port = Number(/127\.0\.0\.1:(\d+)/.exec(listening)[1]);
    const dashLine = await server.waitForLine('drover: dashboard at ');
    const url = dashLine.slice(dashLine.indexOf('https://'));
    const token = fs.readFileSync(`${dir}/state/token`, 'utf8').trim();
    if (url !== `https://127.0.0.1:${port}/#token=${token}`) {
      throw new Error(`the printed dashboard link is "${url}", expected the server's address with #token=`);
    }
    const ca = fs.readFileSync(`${dir}/state/server.crt`);
    log(`server on port ${port}`);
    const admin = await request(port, ca, token, 'GET', '/api/v1/whoami');
    if (admin.role !== 'admin' || !admin.name) {
      throw new Error(`the cluster token should be an admin's, whoami says ${JSON.stringify(admin)}`);
    }

    for (const [name, cpu] of [['alpha', '0'], ['beta', '1']]) {
      const w = new Proc(`worker ${name}`, [opts.drover, 'worker', '--access', `${dir}/access.json`,
        '--name', name, '--workdir', `${dir}/work-${name}`, '--isolation', 'none', '--run-as-root',
        '--cpus', cpu, '--mem', '1GiB', '--gpus', 'none']);
      procs.push(w);
      await w.waitForLine('attached as worker');
    }
    log('2 workers attached');

    context = await chromium.launchPersistentContext(path.join(dir, 'chromium-profile'), {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync'],
      ignoreHTTPSErrors: true,
      viewport: { width: 1280, height: 900 },
    });
    page = context.pages()[0] || await context.newPage();
    page.setDefaultTimeout(WAIT_MS);
    const pageErrors = [];
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    let loads = 0;
    page.on('load', () => { loads += 1; });

    await page.goto(url);
    await page.waitForSelector('#workers [data-worker]');
    if (page.url().includes('token=')) throw new Error(`the token stayed in the address bar: ${page.url()}`);
    await page.waitForFunction(() => document.querySelectorAll('#workers [data-worker]').length === 2);
    await page.getByText('2 workers: 2 online').waitFor();
    await page.locator('#live[data-state="live"]').waitFor();  // the event stream is open
    log('the page shows 2 workers');
    // Who is signed in, and the admins' pages in the navigation.
    await page.locator('#whoami[data-role="admin"]', { hasText: `${admin.name} · admin` }).waitFor();
    for (const nav of ['users', 'audit']) await page.locator(`a[data-nav="${nav}"]`).waitFor();
    log(`the header says ${admin.name} · admin, with the Users and Audit pages`);

    // Drain from the page, then undrain.
    const alpha = page.locator('#workers [data-worker]', { hasText: 'alpha' });
    await alpha.locator('button[data-action="drain"]').click();
    await alpha.locator('[data-worker-state="drained"]').waitFor();
    await alpha.locator('button[data-action="undrain"]').click();
    await alpha.locator('[data-worker-state="online"]').waitFor();
    log('drain and undrain from the page');

    // Submitted after the page is open: it must appear without a reload.
    await page.click('a[data-nav="jobs"]');
    await page.waitForSelector('#jobs');
    const go = path.join(dir, 'go');
    const spec = {
      name: 'browser-pipeline', user: 'ana',
      task: [
        { id: 'prep', command: ['sh', '-c', 'echo prepared'], resources: { cpus: 0.25 } },
        { id: 'train', command: ['sh', '-c', 'echo trained'], resources: { cpus: 0.25 }, depends_on: ['prep'] },
        { id: 'chatty', resources: { cpus: 0.25 }, command: ['sh', '-c',
          `echo "first line"; while [ ! -e '${go}' ]; do sleep 0.05; done; echo "second line"`] },
      ],
    };
    const { id: job } = await request(port, ca, token, 'POST', '/api/v1/jobs', spec);
    log(`submitted job ${job}`);
    await page.locator(`#jobs tr[data-job="${job}"]`).waitFor();
    await page.click(`#jobs tr[data-job="${job}"] a`);
    for (const t of ['0', '1']) {
      await page.locator(`#tasks tr[data-task="${job}.${t}"][data-state="succeeded"]`).waitFor();
    }
    log('prep and train reached succeeded on the job page');

    // The live log: the first line while the task waits, then the second.
    await page.click(`#tasks tr[data-task="${job}.2"] a`);
    await page.locator('#task-state[data-state="running"]').waitFor();
    await page.getByText('while [ ! -e').waitFor();  // its command is shown
    // The admin may cancel any task (this one is ana's).
    await page.locator('button[data-action="cancel-task"]').waitFor();
    await page.locator('#log', { hasText: 'first line' }).waitFor();
    const before = await page.locator('#log').textContent();
    if (before.includes('second line')) throw new Error('the second line came before the file existed');
    fs.writeFileSync(go, '');
    await page.locator('#log', { hasText: 'second line' }).waitFor();
    await page.locator('#task-state[data-state="succeeded"]').waitFor();
    log('the live log showed both lines as they were printed');
    // The attempts table comes from the server: one attempt, succeeded.
    await page.locator('#attempts tr td span[data-state="succeeded"]').waitFor();
    if (await page.locator('#attempts tr').count() !== 1) {
      throw new Error('the attempts table should list exactly the one attempt');
    }
    await page.screenshot({ path: path.join(opts.artifacts, 'dashboard-task.png'), fullPage: true });

    await page.click(`a[href="#/jobs/${job}"]`);
    await page.locator(`#tasks tr[data-task="${job}.2"][data-state="succeeded"]`).waitFor();
    // The timeline marks the critical path from the job's report: chatty
    // (waiting for the file) outlasts prep -> train.
    await page.locator(`#gantt .gantt-row.critical[data-task="${job}.2"]`).waitFor();
    if (await page.locator(`#gantt .gantt-row.critical[data-task="${job}.0"]`).count() !== 0) {
      throw new Error('prep is marked critical, but chatty alone is the critical path');
    }
    await page.screenshot({ path: path.join(opts.artifacts, 'dashboard.png'), fullPage: true });
    await page.click('a[data-nav="workers"]');
    await page.getByText('2 workers: 2 online').waitFor();
    await page.screenshot({ path: path.join(opts.artifacts, 'dashboard-workers.png'), fullPage: true });

    // A workstation in idle-desktop mode whose owner is at it (no input
    // seen yet counts from its start, and it waits an hour): its card says
    // paused, and where its owner is.
    const desk = new Proc('worker desk', [opts.drover, 'worker', '--access', `${dir}/access.json`,
      '--name', 'desk', '--workdir', `${dir}/work-desk`, '--isolation', 'none', '--run-as-root',
      '--cpus', '0', '--mem', '1GiB', '--gpus', 'none', '--desktop',
      '--idle-source', `file:${dir}/owner`, '--idle-after', '1h']);
    procs.push(desk);
    await desk.waitForLine('attached as worker');
    const deskCard = page.locator('#workers [data-worker]', { hasText: 'desk' });
    await deskCard.locator('[data-worker-state="paused"]').waitFor();
    await deskCard.locator('[data-owner-note="owner present; offers work after 1h idle"]').waitFor();
    await page.getByText('3 workers: 2 online, 0 drained, 1 in use by their owners, 0 lost').waitFor();
    await desk.stop();
    log('a desktop worker whose owner is present shows paused, with its owner note');

    // A worker whose health check fails: its card says unhealthy, and why.
    const sick = new Proc('worker sick', [opts.drover, 'worker', '--access', `${dir}/access.json`,
      '--name', 'sick', '--workdir', `${dir}/work-sick`, '--isolation', 'none', '--run-as-root',
      '--cpus', '0', '--mem', '1GiB', '--gpus', 'none',
      '--health-check', 'echo /scratch not mounted; exit 1']);
    procs.push(sick);
    await sick.waitForLine('attached as worker');
    const sickCard = page.locator('#workers [data-worker]', { hasText: 'sick' });
    await sickCard.locator('[data-worker-state="unhealthy"]').waitFor();
    await sickCard.locator('[data-health-note="/scratch not mounted"]').waitFor();
    await page.getByText('1 unhealthy', { exact: false }).waitFor();
    await sick.stop();
    log('a worker whose health check fails shows unhealthy, with the reason');
    await page.click('a[data-nav="utilization"]');
    await page.locator('#chart-resources').waitFor();
    // Samples from the server's ring buffer reach the chart.
    await page.waitForFunction(() => Number(document.getElementById('view').dataset.samples) > 0);
    await page.screenshot({ path: path.join(opts.artifacts, 'dashboard-utilization.png'), fullPage: true });

    // A new tab has no token: the page asks for one, refuses a wrong one
    // (the server answers 401) and opens with the right one.
    const fresh = await context.newPage();
    fresh.setDefaultTimeout(WAIT_MS);
    fresh.on('pageerror', (e) => pageErrors.push(String(e)));
    await fresh.goto(`https://127.0.0.1:${port}/`);
    await fresh.fill('#token-input', 'not-the-token');
    await fresh.press('#token-input', 'Enter');
    await fresh.getByText('That token was refused by the server.').waitFor();
    await fresh.fill('#token-input', token);
    await fresh.press('#token-input', 'Enter');
    // The desktop and sick workers above have left (stopped): still listed, not online.
    await fresh.getByText('4 workers: 2 online').waitFor();
    await fresh.close();
    log('the token form refuses a wrong token and accepts the right one');

    // Users and roles. Two more people through the API, as
    // `drover user add` does; a held job each for the admin and bo (it waits
    // for a file, so it stays cancelable while the pages are checked).
    const bo = await request(port, ca, token, 'POST', '/api/v1/users', { name: 'bo', role: 'user' });
    const vi = await request(port, ca, token, 'POST', '/api/v1/users', { name: 'vi', role: 'viewer' });
    const release = path.join(dir, 'release');
    const held = (name) => ({ name, task: [{ id: 'hold', resources: { cpus: 0.25 }, command: ['sh', '-c',
      `echo ${name}-says-hello; while [ ! -e '${release}' ]; do sleep 0.05; done`] }] });
    const { id: adminJob } = await request(port, ca, token, 'POST', '/api/v1/jobs', held('admins-job'));
    const { id: boJob, user: boJobUser } = await request(port, ca, bo.token, 'POST', '/api/v1/jobs',
      held('bos-job'));
    if (boJobUser !== 'bo') throw new Error(`bo's job belongs to "${boJobUser}"`);
    log(`added bo (user) and vi (viewer); job ${adminJob} is ${admin.name}'s, job ${boJob} bo's`);

    // The jobs page of `tab`: `mine` under "Your jobs", then `theirs`
    // under "Other users' jobs", each newest first.
    const jobsInOrder = async (tab, mine, theirs) => {
      await tab.click('a[data-nav="jobs"]');
      await tab.locator('#jobs-mine-head', { hasText: 'Your jobs' }).waitFor();
      for (const id of mine) await tab.locator(`#jobs-mine tr[data-job="${id}"]`).waitFor();
      for (const id of theirs) await tab.locator(`#jobs-others tr[data-job="${id}"]`).waitFor();
      const ids = await tab.locator('#jobs tr[data-job]')
        .evaluateAll((rows) => rows.map((r) => r.dataset.job));
      if (ids.join(',') !== [...mine, ...theirs].join(',')) {
        throw new Error(`the jobs page lists ${ids.join(', ')}; expected ${mine.join(', ')} ` +
          `(yours), then ${theirs.join(', ')}`);
      }
    };
    // Opens a job from the jobs page; resolves once its head (with the
    // Cancel button, where offered) is drawn.
    const openJob = async (tab, id, name) => {
      await tab.click('a[data-nav="jobs"]');
      await tab.click(`#jobs tr[data-job="${id}"] a`);
      await tab.locator('.job-head strong', { hasText: name }).waitFor();
    };
    const cancelButtons = (tab) => tab.locator('button[data-action="cancel-job"]').count();

    // The admin: their own job first, bo's among the others with its user
    // named, and Cancel on bo's job too.
    await jobsInOrder(page, [adminJob], [boJob, job]);
    await page.locator(`#jobs-others tr[data-job="${boJob}"]`).getByRole('cell', { name: 'bo', exact: true })
      .waitFor();
    await openJob(page, boJob, 'bos-job');
    if (await cancelButtons(page) !== 1) throw new Error('the admin should see Cancel on bo\'s job');
    log('the admin sees their job first and may cancel bo\'s');

    // A tab signed in as `who`: the header names them and their role, the
    // admins' pages are not in the navigation, and the workers page has no
    // drain / undrain button.
    const userTab = async (who) => {
      const tab = await context.newPage();
      tab.setDefaultTimeout(WAIT_MS);
      tab.on('pageerror', (e) => pageErrors.push(String(e)));
      await tab.goto(`https://127.0.0.1:${port}/#token=${who.token}`);
      await tab.locator(`#whoami[data-role="${who.role}"]`, { hasText: `${who.name} · ${who.role}` })
        .waitFor();
      // The navigation is set together with the header.
      for (const nav of ['users', 'audit']) {
        if (await tab.locator(`a[data-nav="${nav}"]`).isVisible()) {
          throw new Error(`${who.name} (${who.role}) should not see the ${nav} page in the navigation`);
        }
      }
      // A worker's card is drawn whole, buttons included.
      await tab.locator('#workers [data-worker]', { hasText: 'alpha' }).waitFor();
      if (await tab.locator('#workers button').count() !== 0) {
        throw new Error(`${who.name} (${who.role}) should see no drain / undrain button`);
      }
      return tab;
    };

    // bo: his job first; no Cancel on the admin's job or its task; Cancel on
    // his own, which works.
    const boTab = await userTab(bo);
    await jobsInOrder(boTab, [boJob], [adminJob, job]);
    await boTab.screenshot({ path: path.join(opts.artifacts, 'dashboard-user.png'), fullPage: true });
    await boTab.locator(`#jobs-others tr[data-job="${adminJob}"]`)
      .getByRole('cell', { name: admin.name, exact: true }).waitFor();
    await openJob(boTab, adminJob, 'admins-job');
    if (await cancelButtons(boTab) !== 0) throw new Error('bo should not see Cancel on the admin\'s job');
    await boTab.click(`#tasks tr[data-task="${adminJob}.0"] a`);
    await boTab.locator('#task-state').waitFor();
    if (await boTab.locator('button[data-action="cancel-task"]').count() !== 0) {
      throw new Error('bo should not see Cancel on a task of the admin\'s job');
    }
    // Nor its log: another user's job's contents are private.
    await boTab.locator('#log-status', { hasText: 'private: a job\'s logs, results and files are for its user' })
      .waitFor();
    if ((await boTab.locator('#log').textContent()).includes('admins-job-says-hello')) {
      throw new Error('bo reads the log of the admin\'s task');
    }
    await openJob(boTab, boJob, 'bos-job');
    await boTab.click(`#tasks tr[data-task="${boJob}.0"] a`);
    await boTab.locator('button[data-action="cancel-task"]').waitFor();
    await openJob(boTab, boJob, 'bos-job');
    await boTab.click('button[data-action="cancel-job"]');
    await boTab.locator(`#tasks tr[data-task="${boJob}.0"][data-state="canceled"]`).waitFor();
    // Canceled, his job offers Retry, which runs the task again.
    await boTab.click('button[data-action="retry-job"]');
    await boTab.locator(`#tasks tr[data-task="${boJob}.0"]:not([data-state="canceled"])`,
      { hasText: 'retried by bo' }).waitFor();
    if (await boTab.locator('button[data-action="retry-job"]').count() !== 0) {
      throw new Error('Retry should go once nothing of the job is failed or canceled');
    }
    // An admin's page typed into the address bar: the server's refusal.
    await boTab.evaluate(() => { window.location.hash = '#/audit'; });
    await boTab.locator('.error', { hasText: 'bo (user) may not GET /api/v1/audit: only admins may' })
      .waitFor();
    await boTab.close();
    log('bo sees his job first, no drain, Cancel only on his own job, cancels it and retries it; ' +
      'the audit page shows him the server\'s refusal');

    // vi, a viewer: no job of hers, and no Cancel on the admin's.
    const viTab = await userTab(vi);
    await viTab.click('a[data-nav="jobs"]');
    await viTab.locator('#jobs-mine', { hasText: 'none of yours' }).waitFor();
    await viTab.locator(`#jobs-others tr[data-job="${adminJob}"]`).waitFor();
    await openJob(viTab, adminJob, 'admins-job');
    if (await cancelButtons(viTab) !== 0) throw new Error('a viewer should not see Cancel');
    // A viewer reads every job's contents: the admin's task's log.
    await viTab.click(`#tasks tr[data-task="${adminJob}.0"] a`);
    await viTab.locator('#log', { hasText: 'admins-job-says-hello' }).waitFor();
    await viTab.close();
    log('vi (viewer) sees no drain and no Cancel, and reads the admin\'s log; bo does not');

    // A worker's token does not open the dashboard.
    const wk = await request(port, ca, token, 'POST', '/api/v1/users', { name: 'wk', role: 'worker' });
    const wkTab = await context.newPage();
    wkTab.setDefaultTimeout(WAIT_MS);
    wkTab.on('pageerror', (e) => pageErrors.push(String(e)));
    await wkTab.goto(`https://127.0.0.1:${port}/#token=${wk.token}`);
    await wkTab.getByText('That token is wk\'s, a worker\'s').waitFor();
    await wkTab.locator('#token-input').waitFor();
    await wkTab.close();
    log('a worker\'s token gets the token form');

    // The admins' pages: bo's creation and his job in the audit log, bo and
    // vi in the users.
    await page.click('a[data-nav="audit"]');
    await page.locator('#audit td', { hasText: /^user bo \(user\)$/ }).waitFor();
    await page.locator('#audit td', { hasText: new RegExp(`^job ${boJob}$`) }).waitFor();
    const seqs = await page.locator('#audit tr[data-seq]').evaluateAll((rows) =>
      rows.map((r) => Number(r.dataset.seq)));
    if (seqs.some((n, i) => i > 0 && n >= seqs[i - 1])) {
      throw new Error(`the audit page should list the newest first: ${seqs.join(', ')}`);
    }
    await page.screenshot({ path: path.join(opts.artifacts, 'dashboard-audit.png'), fullPage: true });
    await page.click('a[data-nav="users"]');
    await page.locator('#users tr[data-user="bo"][data-role="user"]').waitFor();
    await page.locator('#users tr[data-user="vi"][data-role="viewer"]').waitFor();
    fs.writeFileSync(release, '');
    log('the admin\'s Audit page lists bo\'s creation and his job; Users lists bo and vi');

    if (loads !== 1) throw new Error(`the page loaded ${loads} times; updates must not need a reload`);
    if (pageErrors.length) throw new Error(`errors in the page: ${pageErrors.join('; ')}`);
    log(`screenshots in ${opts.artifacts}`);
    console.log('1 passed, 0 failed');
    return 0;
  } catch (e) {
    console.error(`[browser] FAILED: ${e.stack || e}`);
    if (page) {
      await page.screenshot({ path: path.join(opts.artifacts, 'dashboard-failure.png'), fullPage: true })
        .catch(() => {});
    }
    for (const p of procs) console.error(`--- ${p.name} output ---\n${p.output.slice(-4000)}`);
    return 1;
  } finally {
    if (context) await context.close().catch(() => {});
    for (const p of procs.reverse()) await p.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

process.exitCode = await main().catch((e) => {
  console.error(`[browser] FAILED: ${e.stack || e}`);
  return 1;
});
