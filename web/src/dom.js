// h('div', {class: 'x', onclick: fn}, child, ...) builds an element. Text
// children become text nodes, so names and commands from the API are never
// parsed as HTML.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) {
      el.addEventListener(k.slice(2), v);
      el.hasHandlers = true;
    }
    else if (k === 'style' && typeof v === 'object') Object.assign(el.style, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

// Like replace, but keeps every existing node that already shows what the
// new one would: a periodic refresh then leaves unchanged buttons and links
// in place, so a click that straddles a refresh is not lost, and an open
// control keeps its state. Elements with event handlers are kept only when
// equal (their handlers may close over old data), else swapped whole.
export function morph(el, ...children) {
  const fresh = document.createElement(el.tagName);
  append(fresh, children);
  morphChildren(el, fresh);
}

function morphChildren(old, fresh) {
  const olds = [...old.childNodes];
  const news = [...fresh.childNodes];
  news.forEach((n, i) => {
    const o = olds[i];
    if (!o) {
      old.appendChild(n);
    } else if (o.isEqualNode(n)) {
      // keep o
    } else if (o.nodeType === Node.TEXT_NODE && n.nodeType === Node.TEXT_NODE) {
      o.nodeValue = n.nodeValue;
    } else if (o.nodeType !== Node.ELEMENT_NODE || o.nodeName !== n.nodeName ||
               o.hasHandlers || n.hasHandlers) {
      old.replaceChild(n, o);
    } else {
      for (const a of [...o.attributes]) if (!n.hasAttribute(a.name)) o.removeAttribute(a.name);
      for (const a of [...n.attributes]) {
        if (o.getAttribute(a.name) !== a.value) o.setAttribute(a.name, a.value);
      }
      morphChildren(o, n);
    }
  });
  for (let i = news.length; i < olds.length; i++) olds[i].remove();
}

export function bytes(n) {
  if (n === null || n === undefined) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

export function seconds(s) {
  if (s === null || s === undefined || Number.isNaN(s)) return '–';
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} m ${Math.round(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} m`;
}

export function time(ms) {
  if (ms === null || ms === undefined) return '–';
  return new Date(ms).toLocaleString();
}

// A horizontal bar: `fraction` of it filled, with a label.
export function bar(fraction, label, cls = '') {
  const f = Math.max(0, Math.min(1, Number(fraction) || 0));
  return h('div', { class: `bar ${cls}`, title: label },
    h('div', { class: 'fill', style: { width: `${(f * 100).toFixed(1)}%` } }),
    h('span', { class: 'label' }, label));
}

export function stateBadge(state) {
  return h('span', { class: `state state-${state}`, 'data-state': state }, state);
}

export const TASK_STATES =
  ['waiting', 'queued', 'assigned', 'running', 'succeeded', 'failed', 'canceled'];
