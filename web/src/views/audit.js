// The audit log (admins only; the navigation shows the page to admins): the
// newest LIMIT writes, refused ones included, newest first, from
// GET /api/v1/audit, asked again every few seconds (not on events: a busy
// cluster's task events would reread the log many times a second).
import { api } from '../api.js';
import { h, morph, replace, time } from '../dom.js';
import { refresher } from './refresh.js';

const LIMIT = 200;

export function auditView(el) {
  const body = h('tbody', { id: 'audit' });
  const note = h('p', { class: 'muted' });
  const err = h('p', { class: 'error' });
  replace(el, h('h2', {}, 'Audit log'), note, err,
    h('table', { class: 'table' },
      h('thead', {}, h('tr', {}, ['#', 'Time', 'User', 'Role', 'From', 'Request', 'Status', 'Detail']
        .map((c) => h('th', {}, c)))),
      body));

  const r = refresher(async () => {
    const { entries } = await api(`/api/v1/audit?limit=${LIMIT}`);
    note.textContent = `The newest ${LIMIT} writes, newest first; "drover audit" reads them all.`;
    const rows = [...entries].reverse();
    morph(body, rows.length === 0
      ? h('tr', {}, h('td', { colspan: 8, class: 'muted' }, 'no writes yet'))
      : rows.map((e) => h('tr', { 'data-seq': e.seq, class: e.status >= 400 ? 'refused' : null },
        h('td', {}, String(e.seq)), h('td', {}, time(Date.parse(e.at))),
        h('td', {}, e.user), h('td', {}, e.role), h('td', {}, e.from),
        h('td', {}, h('code', {}, `${e.method} ${e.path}`)),
        h('td', {}, String(e.status)), h('td', {}, e.detail))));
    err.textContent = '';
  }, { everyMs: 3000, onError: (e) => { err.textContent = `Audit: ${e.message}`; } });
  return { dispose: () => r.dispose() };
}
