// Entry point: token handling, who is signed in (session.js), the hash
// router (#/, #/jobs, #/jobs/12, #/tasks/12.3, #/utilization, and for admins
// #/users and #/audit) and the one event stream every view listens to, so
// pages update without reloading.
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { EventFeed, forgetToken, setToken, takeTokenFromUrl, token } from './api.js';
import { h, replace } from './dom.js';
import { isAdmin, loadWhoami, whoami } from './session.js';
import { workersView } from './views/workers.js';
import { jobsView } from './views/jobs.js';
import { jobView } from './views/job.js';
import { taskView } from './views/task.js';
import { utilizationView } from './views/utilization.js';
import { usersView } from './views/users.js';
import { auditView } from './views/audit.js';

const routes = [
  [/^#?\/?$/, 'workers', () => workersView],
  [/^#\/jobs\/?$/, 'jobs', () => jobsView],
  [/^#\/jobs\/(\d+)$/, 'jobs', () => jobView],
  [/^#\/tasks\/(\d+\.\d+)$/, 'jobs', () => taskView],
  [/^#\/utilization$/, 'utilization', () => utilizationView],
  [/^#\/users$/, 'users', () => usersView],
  [/^#\/audit$/, 'audit', () => auditView],
];

// Every task_state event seen since the page loaded, per task: the task
// page shows them as its attempt history.
const history = new Map();
let current = null;
let feed = null;

function recordEvent(ev) {
  if (ev.type !== 'task_state') return;
  if (!history.has(ev.task)) history.set(ev.task, []);
  const list = history.get(ev.task);
  const last = list[list.length - 1];
  if (last && last.to === ev.to && last.attempt === ev.attempt) return;  // snapshot repeat
  list.push(ev);
}

function setLive(state) {
  const el = document.getElementById('live');
  el.textContent = state;
  el.dataset.state = state;
  // The server was out of reach when the page asked who it is: ask again.
  if (state === 'live' && !whoami().known) {
    loadWhoami().then(() => {
      showWhoami();
      route();
    }).catch(() => {});
  }
}

// "ana · user" in the header; the admins' pages in the navigation only for
// admins.
function showWhoami() {
  const { name, role, known } = whoami();
  const el = document.getElementById('whoami');
  el.textContent = known ? `${name || 'cluster token'} · ${role}` : '';
  el.dataset.user = name;
  el.dataset.role = role;
  for (const a of document.querySelectorAll('[data-admin-only]')) a.hidden = !isAdmin();
}

function tokenForm(message) {
  const input = h('input', { type: 'password', id: 'token-input', placeholder: 'cluster token',
    autocomplete: 'off', size: 40 });
  const form = h('form', { class: 'token-form', onsubmit: (e) => {
    e.preventDefault();
    setToken(input.value);
    start();
  } },
  h('h2', {}, 'Sign in'),
  h('p', {}, message),
  h('p', { class: 'muted' }, 'The token is in the server\'s state directory (file "token"); ',
    '"drover server" and "drover up" print a dashboard link that carries it.'),
  input, ' ', h('button', { type: 'submit' }, 'Open'));
  replace(document.getElementById('view'), form);
}

function route() {
  const hash = window.location.hash || '#/';
  for (const [re, nav, view] of routes) {
    const m = re.exec(hash);
    if (!m) continue;
    for (const a of document.querySelectorAll('[data-nav]')) {
      a.classList.toggle('active', a.dataset.nav === nav);
    }
    if (current && current.dispose) current.dispose();
    const el = document.getElementById('view');
    replace(el);
    current = view()(el, m.slice(1), { history });
    return;
  }
  replace(document.getElementById('view'), h('p', { class: 'error' }, `No page at ${hash}`));
}

async function start() {
  if (!token()) return tokenForm('Enter the cluster token to see this cluster.');
  try {
    await loadWhoami();
  } catch (e) {
    if (e.status === 401) {
      forgetToken();
      return tokenForm('That token was refused by the server.');
    }
    // Out of reach: the views say so, and setLive asks again once it answers.
  }
  if (whoami().role === 'worker') {
    forgetToken();
    return tokenForm(`That token is ${whoami().name}'s, a worker's: it joins workers to the ` +
      'cluster and cannot open the dashboard.');
  }
  showWhoami();
  if (!feed) {
    feed = new EventFeed((ev) => {
      recordEvent(ev);
      if (current && current.onEvent) current.onEvent(ev);
    }, setLive);
  }
  route();
}

takeTokenFromUrl();
window.addEventListener('hashchange', () => {
  if (/token=/.test(window.location.hash)) {
    // Another token: another user, and an event stream opened with it.
    takeTokenFromUrl();
    if (feed) feed.close();
    feed = null;
    start();
  } else if (token()) {
    route();
  }
});
start();
