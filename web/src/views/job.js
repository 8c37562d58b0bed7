// One job: its counts and progress, its tasks, the timeline (Gantt) with
// the critical path from /api/v1/jobs/{id}/report, and Cancel and Retry
// buttons for those who may change it (session.js: admins, and the job's
// own user); Retry shows while the job has failed or canceled tasks.
// Without a report (an older server) the timeline comes from the tasks' own
// times.
// The server pages a job's tasks (src/server/paging.h): the table and the
// timeline show one page of PAGE tasks, with links to the others.
import { ApiError, api } from '../api.js';
import { h, morph, replace, seconds, stateBadge, time } from '../dom.js';
import { gantt } from '../gantt.js';
import { mayChange } from '../session.js';
import { countsLine, progress } from './jobs.js';
import { refresher } from './refresh.js';

const PAGE = 500;

async function report(id, offset) {
  try {
    return await api(`/api/v1/jobs/${id}/report?offset=${offset}&limit=${PAGE}`);
  } catch (e) {
    if (e instanceof ApiError && (e.status === 404 || e.status === 405)) return null;
    throw e;
  }
}

function wall(t) {
  if (t.outcome) return seconds(t.outcome.wall_ms / 1000);
  if (t.started_at_ms) return seconds((Date.now() - t.started_at_ms) / 1000);
  return '–';
}

export function jobView(el, [id]) {
  const head = h('div', { class: 'job-head' });
  const timeline = h('div', {});
  const body = h('tbody', { id: 'tasks' });
  const pager = h('p', { class: 'muted' });
  let offset = 0;
  const turn = (to) => h('a', { href: '#', onclick: (e) => {
    e.preventDefault();
    offset = to;
    r.poke();
  } }, to > offset ? 'next' : 'previous');
  const err = h('p', { class: 'error' });
  // A refused action's message stays until the next action (a refresh
  // clears only its own errors).
  const refused = h('p', { class: 'error', id: 'action-error' });
  const cancel = h('button', { class: 'danger', 'data-action': 'cancel-job', onclick: async () => {
    try {
      await api(`/api/v1/jobs/${id}/cancel`, { method: 'POST' });
      refused.textContent = '';
    } catch (e) {
      refused.textContent = `Cancel: ${e.message}`;
    }
    r.poke();
  } }, 'Cancel job');
  const retry = h('button', { 'data-action': 'retry-job', onclick: async () => {
    try {
      await api(`/api/v1/jobs/${id}/retry`, { method: 'POST' });
      refused.textContent = '';
    } catch (e) {
      refused.textContent = `Retry: ${e.message}`;
    }
    r.poke();
  } }, 'Retry failed tasks');
  replace(el, h('h2', {}, `Job ${id}`), head, refused, err,
    h('h3', {}, 'Timeline'), timeline,
    h('h3', {}, 'Tasks'), pager,
    h('table', { class: 'table' },
      h('thead', {}, h('tr', {}, ['Task', 'Group', 'State', 'Worker', 'Attempt', 'Wall', 'Reason']
        .map((c) => h('th', {}, c)))),
      body));

  const r = refresher(async () => {
    const [job, rep] = await Promise.all([
      api(`/api/v1/jobs/${id}?offset=${offset}&limit=${PAGE}`), report(id, offset)]);
    const shown = job.tasks.length;
    morph(pager, job.task_count > shown || offset > 0
      ? [`tasks ${offset + 1}–${offset + shown} of ${job.task_count} `,
        offset > 0 ? turn(Math.max(0, offset - PAGE)) : null, ' ',
        job.next_offset != null ? turn(job.next_offset) : null]
      : []);
    morph(head,
      h('p', {}, h('strong', {}, job.name || '(unnamed)'), job.user ? ` by ${job.user}` : '',
        `, submitted ${time(job.submitted_at_ms)}`, job.done ? ', done' : ''),
      progress(job.counts, job.task_count),
      h('p', { class: 'counts' }, countsLine(job.counts)),
      rep && rep.makespan_s !== undefined
        ? h('p', { class: 'muted' }, `makespan ${seconds(rep.makespan_s)}; critical path `,
          (rep.critical_path || []).join(' → ') || '–') : null,
      job.done || !mayChange(job.user) ? null : cancel,
      (job.counts.failed || 0) + (job.counts.canceled || 0) > 0 && mayChange(job.user)
        ? retry : null);
    morph(body, job.tasks.map((t) => h('tr', { 'data-task': t.id, 'data-state': t.state },
      h('td', {}, h('a', { href: `#/tasks/${t.id}` }, t.id)),
      h('td', {}, t.group + (t.array_index ? `[${t.array_index}]` : '')),
      h('td', {}, stateBadge(t.state)),
      h('td', {}, t.worker ?? '–'),
      h('td', {}, String(t.attempt)),
      h('td', {}, wall(t)),
      h('td', {}, t.reason || ''))));
    let rows;
    if (rep && Array.isArray(rep.tasks)) {
      rows = rep.tasks.map((t) => ({ id: t.id, name: t.name, state: t.state,
        start_ms: t.start_ms, end_ms: t.end_ms, critical: !!t.critical }));
    } else {
      rows = job.tasks.map((t) => ({ id: t.id, name: t.group, state: t.state,
        start_ms: t.started_at_ms, end_ms: t.finished_at_ms, critical: false }));
    }
    morph(timeline, gantt(rows, Date.now()));
    err.textContent = '';
  }, { everyMs: 5000, onError: (e) => { err.textContent = `Job ${id}: ${e.message}`; } });
  return {
    onEvent: (ev) => { if (ev.task && ev.task.startsWith(`${id}.`)) r.poke(); },
    dispose: () => r.dispose(),
  };
}
