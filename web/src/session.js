// Who the dashboard is signed in as (GET /api/v1/whoami: the token's user
// and role) and what the page offers them. This only decides which buttons
// and pages are shown; the server decides what is allowed
// (src/server/access.cc) and a refusal (403) still shows its message.
//
//   admin   every action: drain / undrain, cancel any job, Users and Audit
//   user    cancel their own jobs and tasks
//   viewer  no write action
import { ApiError, api } from './api.js';

let me = { name: '', role: '', known: false };

// Asks the server who the token belongs to. Throws the ApiError of a
// refused token (401). A server without /api/v1/whoami (404) predates users:
// its one token may do everything, so everything is shown.
export async function loadWhoami() {
  try {
    const w = await api('/api/v1/whoami');
    me = { name: w.name || '', role: w.role || '', known: true };
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 404) throw e;
    me = { name: '', role: 'admin', known: true };
  }
  return me;
}

export function whoami() {
  return me;
}

export function isAdmin() {
  return me.role === 'admin';
}

// May the signed-in user cancel (or otherwise change) a job of `owner`?
export function mayChange(owner) {
  return isAdmin() || (me.role === 'user' && me.name !== '' && owner === me.name);
}

// Is `owner` the signed-in user (the jobs page lists their jobs first)?
export function isMine(owner) {
  return me.name !== '' && owner === me.name;
}
