// The dashboard's one door to the server: REST calls with the cluster token
// and the two WebSockets (events, log follow). The token comes from the URL
// fragment (#token=...), is kept in sessionStorage and removed from the
// address bar, or is typed into the token form.

const KEY = 'drover.token';

export function takeTokenFromUrl() {
  const m = /(?:^#|[#&])token=([^&]+)/.exec(window.location.hash);
  if (!m) return;
  sessionStorage.setItem(KEY, decodeURIComponent(m[1]));
  history.replaceState(null, '', window.location.pathname + window.location.search + '#/');
}

export function token() {
  return sessionStorage.getItem(KEY) || '';
}

export function setToken(t) {
  sessionStorage.setItem(KEY, t.trim());
}

export function forgetToken() {
  sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function api(path, options = {}) {
  const res = await fetch(path, {
    ...options,
    headers: { Authorization: `Bearer ${token()}`, ...(options.headers || {}) },
  });
  const text = await res.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!res.ok) {
    const err = body && body.error ? body.error : { code: String(res.status), message: text };
    throw new ApiError(res.status, err.code, err.message || `HTTP ${res.status}`);
  }
  return body;
}

export function wsUrl(path, params = {}) {
  const proto = window.location.protocol === 'https:' ? 'wss:' : 'ws:';
  const q = new URLSearchParams({ ...params, token: token() });
  return `${proto}//${window.location.host}${path}?${q}`;
}

// The /api/v1/events stream, reconnecting with backoff. `onEvent` gets each
// decoded event; `onStatus` gets 'live' or 'offline'.
export class EventFeed {
  constructor(onEvent, onStatus) {
    this.onEvent = onEvent;
    this.onStatus = onStatus;
    this.delay = 500;
    this.closed = false;
    this.open();
  }

  open() {
    if (this.closed) return;
    // No snapshot: the views load what they show and only need to hear of
    // changes (a snapshot of a million-task job is a million messages).
    // Batched: each message is an array of events, so a busy pool's tens
    // of thousands of changes a second do not fall behind; coalesced: while
    // a message is on its way, each task's changes merge into one event
    // (its latest state), which is all the views show.
    const ws = new WebSocket(
      wsUrl('/api/v1/events', { snapshot: 'false', batch: 'true', coalesce: 'true' }),
    );
    this.ws = ws;
    ws.onopen = () => {
      this.delay = 500;
      this.onStatus('live');
    };
    ws.onmessage = (m) => {
      let data;
      try {
        data = JSON.parse(m.data);
      } catch (e) {
        console.warn('bad event', e);
        return;
      }
      for (const event of Array.isArray(data) ? data : [data]) this.onEvent(event);
    };
    ws.onclose = () => {
      this.onStatus('offline');
      if (this.closed) return;
      setTimeout(() => this.open(), this.delay);
      this.delay = Math.min(this.delay * 2, 10000);
    };
  }

  // Stops for good: no more events, status changes or reconnects.
  close() {
    this.closed = true;
    if (!this.ws) return;
    this.ws.onmessage = null;
    this.ws.onclose = null;
    this.ws.close();
  }
}
