// Users (admins only; the navigation shows the page to admins): each user's
// role, when they were added and last changed, and whether their token is
// revoked, from GET /api/v1/users. Read only: `drover user add|rotate|revoke`
// change them (a new token is shown once, which a page would have to keep).
import { api } from '../api.js';
import { h, morph, replace, time } from '../dom.js';
import { refresher } from './refresh.js';

export function usersView(el) {
  const body = h('tbody', { id: 'users' });
  const err = h('p', { class: 'error' });
  replace(el, h('h2', {}, 'Users'),
    h('p', { class: 'muted' }, 'Add, rotate and revoke with "drover user" (docs/guide.md).'), err,
    h('table', { class: 'table' },
      h('thead', {}, h('tr', {}, ['Name', 'Role', 'Added', 'Changed', 'Token']
        .map((c) => h('th', {}, c)))),
      body));

  // Users change without an event: the page asks again every few seconds.
  const r = refresher(async () => {
    const { users } = await api('/api/v1/users');
    morph(body, users.map((u) => h('tr', { 'data-user': u.name, 'data-role': u.role },
      h('td', {}, u.name), h('td', {}, u.role),
      h('td', {}, time(Date.parse(u.created))), h('td', {}, time(Date.parse(u.changed))),
      h('td', {}, u.revoked ? 'revoked' : 'active'))));
    err.textContent = '';
  }, { everyMs: 10000, onError: (e) => { err.textContent = `Users: ${e.message}`; } });
  return { dispose: () => r.dispose() };
}
