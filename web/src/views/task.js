// One task: command, resources, state, every attempt (from the server) and
// the state changes seen while the page is open, and its
// live log over /api/v1/tasks/{id}/logs/follow (opened once an attempt has
// started; reopened when a new attempt starts; not for another user's task,
// whose log is private). A Cancel button for those who may cancel it
// (session.js: admins, and the job's own user).
import { api, wsUrl } from '../api.js';
import { bytes, h, morph, replace, seconds, stateBadge, time } from '../dom.js';
import { mayChange } from '../session.js';
import { refresher } from './refresh.js';

function kv(rows) {
  return h('dl', { class: 'kv' }, rows.filter(([, v]) => v !== null && v !== undefined && v !== '')
    .map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

function resources(res) {
  if (!res) return null;
  return Object.entries(res).filter(([, v]) => v !== null && v !== undefined &&
    !(typeof v === 'object' && Object.keys(v).length === 0))
    .map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : v}`).join('  ');
}

function outcome(o) {
  if (!o) return null;
  const end = o.signal ? `signal ${o.signal}` : `exit code ${o.exit_code}`;
  return `${end}${o.oom_killed ? ' (OOM-killed)' : ''}; wall ${seconds(o.wall_ms / 1000)}, ` +
    `cpu ${seconds(o.cpu_ms / 1000)}, peak memory ${bytes(o.peak_mem_bytes)}`;
}

// Follows one stream of one attempt; lines are appended to `pre`.
class LogFollow {
  constructor(id, stream, pre, status) {
    this.pre = pre;
    this.status = status;
    this.decoder = new TextDecoder();
    this.ws = new WebSocket(wsUrl(`/api/v1/tasks/${id}/logs/follow`, { stream }));
    this.ws.binaryType = 'arraybuffer';
    this.ended = false;
    this.ws.onopen = () => { status.textContent = 'following'; };
    this.ws.onmessage = (m) => {
      if (typeof m.data === 'string') {
        let msg = {};
        try { msg = JSON.parse(m.data); } catch { /* not ours */ }
        this.ended = true;
        status.textContent = msg.type === 'eof' ? 'end of log' : `log: ${msg.message || m.data}`;
        return;
      }
      const text = this.decoder.decode(m.data, { stream: true });
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.append(text);
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    };
    this.ws.onclose = () => {
      if (!this.ended) status.textContent = 'log connection closed';
      this.ended = true;
    };
  }

  close() {
    this.ended = true;
    this.ws.close();
  }
}

export function taskView(el, [id], { history }) {
  const info = h('div', {});
  const attempts = h('tbody', { id: 'attempts' });
  const changes = h('tbody', { id: 'changes' });
  const err = h('p', { class: 'error' });
  // A refused cancel's message stays until the next click (a refresh clears
  // only its own errors).
  const refused = h('p', { class: 'error', id: 'action-error' });
  const pre = h('pre', { class: 'log', id: 'log' });
  const logStatus = h('span', { class: 'muted', id: 'log-status' }, 'waiting for the task to start');
  const streamSel = h('select', { id: 'log-stream' },
    h('option', { value: 'stdout' }, 'stdout'), h('option', { value: 'stderr' }, 'stderr'));
  const cancel = h('button', { class: 'danger', 'data-action': 'cancel-task', onclick: async () => {
    try {
      await api(`/api/v1/tasks/${id}/cancel`, { method: 'POST' });
      refused.textContent = '';
    } catch (e) {
      refused.textContent = `Cancel: ${e.message}`;
    }
  } }, 'Cancel task');
  const job = id.split('.')[0];
  replace(el, h('p', { class: 'crumbs' }, h('a', { href: `#/jobs/${job}` }, `Job ${job}`), ' / '),
    h('h2', {}, `Task ${id}`), refused, err, info,
    h('h3', {}, 'Attempts'),
    h('table', { class: 'table' }, h('thead', {}, h('tr', {},
      ['Attempt', 'Worker', 'Started', 'Finished', 'Ended as', 'Outcome', 'Reason']
        .map((c) => h('th', {}, c)))), attempts),
    h('h3', {}, 'Changes seen on this page'),
    h('table', { class: 'table' }, h('thead', {}, h('tr', {},
      ['Time', 'Attempt', 'From', 'To', 'Reason'].map((c) => h('th', {}, c)))), changes),
    h('h3', {}, 'Log ', streamSel, ' ', logStatus), pre);

  let follow = null;
  let followKey = '';
  const openFollow = (task) => {
    // Another user's task: its log is theirs (and admins' and viewers').
    if (task.contents_hidden) {
      if (follow) follow.close();
      follow = null;
      pre.textContent = '';
      logStatus.textContent = `private: a job's logs, results and files are for its user${
        owner ? ` (${owner})` : ''}, admins and viewers`;
      return;
    }
    const started = task.attempt > 0 && task.state !== 'assigned' &&
      task.state !== 'queued' && task.state !== 'waiting';
    const key = `${task.attempt}/${streamSel.value}`;
    if (!started || (follow && followKey === key && !follow.ended)) return;
    if (follow && followKey === key && follow.ended) return;  // that attempt's log is complete
    if (follow) follow.close();
    pre.textContent = '';
    followKey = key;
    follow = new LogFollow(id, streamSel.value, pre, logStatus);
  };

  // The job's user (a task's answer does not name it), asked once: it
  // decides whether the Cancel button is offered.
  let owner = null;
  const r = refresher(async () => {
    const [t, j] = await Promise.all([api(`/api/v1/tasks/${id}`),
      owner === null ? api(`/api/v1/jobs/${job}?limit=0`) : null]);
    if (j) owner = j.user || '';
    const spec = t.spec || {};
    const tries = spec.retries !== undefined ? ` of ${spec.retries + 1}` : '';
    morph(info, kv([
      ['State', h('span', { id: 'task-state', 'data-state': t.state }, stateBadge(t.state))],
      ['Command', spec.command ? h('code', {}, spec.command.join(' ')) : null],
      ['Resources', resources(spec.resources)],
      ['Attempt', `${t.attempt}${tries}`],
      ['Worker', t.worker ?? null],
      ['Reason', t.reason],
      ['Why', t.state === 'queued' || t.state === 'waiting' ? t.explain : null],
      ['Submitted', time(t.submitted_at_ms)],
      ['Started', t.started_at_ms ? time(t.started_at_ms) : null],
      ['Finished', t.finished_at_ms ? time(t.finished_at_ms) : null],
      ['Retry at', t.retry_at_ms ? time(t.retry_at_ms) : null],
      ['Outcome', outcome(t.outcome)],
      ['Cores', t.cores.length ? t.cores.join(',') : null],
      ['GPUs', t.gpus.length ? t.gpus.map((g) => `${g.index} (${g.share}%)`).join(', ') : null],
    ]), ['succeeded', 'failed', 'canceled'].includes(t.state) || !mayChange(owner) ? null : cancel);
    // Every attempt, from the server (it keeps them across restarts).
    const all = t.attempts || [];
    morph(attempts, all.length === 0
      ? h('tr', {}, h('td', { colspan: 7, class: 'muted' }, 'no attempt yet'))
      : all.map((a) => h('tr', {}, h('td', {}, String(a.attempt)), h('td', {}, String(a.worker ?? '')),
        h('td', {}, a.started_at_ms ? time(a.started_at_ms) : ''),
        h('td', {}, a.finished_at_ms ? time(a.finished_at_ms) : ''),
        h('td', {}, stateBadge(a.state)), h('td', {}, outcome(a.outcome) || ''),
        h('td', {}, a.reason || ''))));
    const seen = history.get(id) || [];
    morph(changes, seen.length === 0
      ? h('tr', {}, h('td', { colspan: 5, class: 'muted' },
        `attempt ${t.attempt}${t.reason ? `: ${t.reason}` : ''} (changes appear here as they happen)`))
      : seen.map((e) => h('tr', {}, h('td', {}, time(e.at_ms)), h('td', {}, String(e.attempt)),
        h('td', {}, e.from), h('td', {}, stateBadge(e.to)), h('td', {}, e.reason || ''))));
    openFollow(t);
    err.textContent = '';
  }, { onError: (e) => { err.textContent = `Task ${id}: ${e.message}`; } });
  streamSel.addEventListener('change', () => r.poke());
  return {
    onEvent: (ev) => { if (ev.task === id) r.poke(); },
    dispose: () => { r.dispose(); if (follow) follow.close(); },
  };
}
