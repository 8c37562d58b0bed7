// Jobs: task counts by state, a progress bar per job, filters by state
// (answered by the server, ?state=) and by user. The signed-in user's jobs
// come first ("Your jobs"), then everyone else's; each row names its user.
import { api } from '../api.js';
import { TASK_STATES, h, morph, replace, stateBadge, time } from '../dom.js';
import { isMine, whoami } from '../session.js';
import { refresher } from './refresh.js';

export function progress(counts, total) {
  const seg = (state) => {
    const n = counts[state] || 0;
    if (!n || !total) return null;
    return h('div', { class: `seg seg-${state}`, title: `${n} ${state}`,
      style: { width: `${(100 * n) / total}%` } });
  };
  const done = (counts.succeeded || 0) + (counts.failed || 0) + (counts.canceled || 0);
  return h('div', { class: 'progress', title: `${done}/${total} done` },
    ['succeeded', 'failed', 'canceled', 'running', 'assigned'].map(seg),
    h('span', { class: 'label' }, `${done}/${total}`));
}

export function countsLine(counts) {
  return TASK_STATES.filter((s) => counts[s]).map((s) =>
    h('span', { class: `count count-${s}` }, stateBadge(s), ` ${counts[s]}`));
}

function jobRows(jobs, none) {
  if (jobs.length === 0) return h('tr', {}, h('td', { colspan: 6, class: 'muted' }, none));
  return jobs.map((j) => h('tr', { 'data-job': j.id, 'data-user': j.user || '' },
    h('td', {}, h('a', { href: `#/jobs/${j.id}` }, String(j.id))),
    h('td', {}, h('a', { href: `#/jobs/${j.id}` }, j.name || '(unnamed)')),
    h('td', {}, j.user || ''),
    h('td', {}, time(j.submitted_at_ms)),
    h('td', {}, progress(j.counts, j.task_count)),
    h('td', {}, countsLine(j.counts))));
}

export function jobsView(el) {
  const stateSel = h('select', { id: 'filter-state' },
    ['', 'active', 'done', ...TASK_STATES].map((s) => h('option', { value: s }, s || 'any state')));
  const userSel = h('select', { id: 'filter-user' }, h('option', { value: '' }, 'any user'));
  const totals = h('div', { class: 'totals' });
  const mine = h('tbody', { id: 'jobs-mine' });
  const others = h('tbody', { id: 'jobs-others' });
  const err = h('p', { class: 'error' });
  const table = (body) => h('table', { class: 'table jobs-table' },
    h('thead', {}, h('tr', {}, ['Job', 'Name', 'User', 'Submitted', 'Progress', 'Tasks']
      .map((c) => h('th', {}, c)))),
    body);
  // Without a name (the bare cluster token of a server without users)
  // nothing is "yours": one list.
  const me = whoami().name;
  replace(el, h('h2', {}, 'Jobs'),
    h('div', { class: 'filters' }, h('label', {}, 'State ', stateSel), ' ',
      h('label', {}, 'User ', userSel)),
    totals, err,
    h('div', { id: 'jobs' },
      me ? [h('h3', { id: 'jobs-mine-head' }, 'Your jobs', h('span', { class: 'muted' }, ` (${me})`)),
        table(mine)] : null,
      h('h3', { id: 'jobs-others-head' }, me ? 'Other users\' jobs' : 'All jobs'), table(others)));

  const r = refresher(async () => {
    const q = stateSel.value ? `?state=${encodeURIComponent(stateSel.value)}` : '';
    const { jobs } = await api(`/api/v1/jobs${q}`);
    const users = [...new Set(jobs.map((j) => j.user || ''))].sort();
    const chosen = userSel.value;
    morph(userSel, h('option', { value: '' }, 'any user'),
      users.filter((u) => u).map((u) => h('option', { value: u, selected: u === chosen }, u)));
    const shown = jobs.filter((j) => !chosen || j.user === chosen).reverse();
    const sum = {};
    for (const j of shown) for (const s of TASK_STATES) sum[s] = (sum[s] || 0) + (j.counts[s] || 0);
    morph(totals, h('span', { class: 'muted' }, `${shown.length} jobs; tasks: `), countsLine(sum));
    if (me) morph(mine, jobRows(shown.filter((j) => isMine(j.user)), 'none of yours'));
    morph(others, jobRows(shown.filter((j) => !isMine(j.user)), 'no jobs'));
    err.textContent = '';
  }, { onError: (e) => { err.textContent = `Jobs: ${e.message}`; } });
  stateSel.addEventListener('change', () => r.poke());
  userSel.addEventListener('change', () => r.poke());
  return { onEvent: () => r.poke(), dispose: () => r.dispose() };
}
