// Workers: state, CPU / memory / per-GPU utilization bars, running tasks,
// and for admins (the only ones the server lets drain) a drain / undrain
// button.
import { api } from '../api.js';
import { bar, bytes, h, morph, replace } from '../dom.js';
import { isAdmin } from '../session.js';
import { refresher } from './refresh.js';

function workerState(w) {
  if (w.lost) return 'lost';
  if (w.drained) return 'drained';
  if (w.paused) return 'paused';
  if (w.unhealthy) return 'unhealthy';
  if (w.quarantined) return 'quarantined';
  return 'online';
}

// Its own health checks fail, or it is quarantined as a black hole: why,
// and since or until when.
function healthNote(w) {
  if (!w.unhealthy && w.quarantined) {
    const until = w.quarantined_until_ms ? new Date(w.quarantined_until_ms).toLocaleTimeString() : '';
    return h('p', { class: 'muted health-note', 'data-quarantine-note': w.quarantined },
      until ? `quarantined until ${until}: ${w.quarantined}` : `quarantined: ${w.quarantined}`);
  }
  if (!w.unhealthy) return null;
  const since = w.unhealthy_since_ms ? new Date(w.unhealthy_since_ms).toLocaleTimeString() : '';
  return h('p', { class: 'muted health-note', 'data-health-note': w.unhealthy },
    since ? `takes no work: ${w.unhealthy}, since ${since}` : `takes no work: ${w.unhealthy}`);
}

// Idle-desktop mode: where the workstation's owner is, and since when.
function ownerNote(w) {
  if (!w.note) return null;
  const since = w.note_since_ms ? new Date(w.note_since_ms).toLocaleTimeString() : '';
  return h('p', { class: 'muted owner-note', 'data-owner-note': w.note },
    since ? `${w.note}, since ${since}` : w.note);
}

function card(w, onToggle) {
  const cores = w.cpu_cores.length;
  const usedCores = cores - w.free_cores.length;
  const u = w.utilization || { cpu_percent: 0, mem_used_bytes: 0, gpus: [] };
  const memAlloc = w.mem_bytes - w.free_mem_bytes;
  const gpuUse = new Map((u.gpus || []).map((g) => [g.index, g]));
  const state = workerState(w);
  return h('section', { class: `card worker worker-${state}`, 'data-worker': w.id },
    h('div', { class: 'card-head' },
      h('h3', {}, w.name, h('span', { class: 'muted' }, ` #${w.id}`)),
      h('span', { class: `pill pill-${state}`, 'data-worker-state': state }, state),
      onToggle ? h('button', { class: 'drain', 'data-action': w.drained ? 'undrain' : 'drain',
        disabled: w.lost, onclick: () => onToggle(w) }, w.drained ? 'Undrain' : 'Drain') : null),
    ownerNote(w),
    healthNote(w),
    h('div', { class: 'metric' }, h('span', { class: 'k' }, 'CPU'),
      bar(u.cpu_percent / 100, `${u.cpu_percent}% busy (whole machine)`),
      bar(cores ? usedCores / cores : 0, `${usedCores}/${cores} cores allocated`, 'alloc')),
    h('div', { class: 'metric' }, h('span', { class: 'k' }, 'Memory'),
      bar(w.mem_bytes ? u.mem_used_bytes / w.mem_bytes : 0,
        `${bytes(u.mem_used_bytes)} used on the machine; ${bytes(w.mem_bytes)} offered`),
      bar(w.mem_bytes ? memAlloc / w.mem_bytes : 0, `${bytes(memAlloc)} allocated`, 'alloc')),
    w.gpus.map((g, i) => {
      const use = gpuUse.get(g.index) || { util_percent: 0, mem_used_bytes: 0 };
      return h('div', { class: 'metric' },
        h('span', { class: 'k', title: g.sick ? `sick: ${g.sick}` : g.uuid, 'data-gpu-sick': g.sick || null },
          g.sick ? `GPU ${g.index} (sick)` : `GPU ${g.index}`),
        bar(use.util_percent / 100, `${use.util_percent}% ${g.model}`),
        bar(g.memory_bytes ? use.mem_used_bytes / g.memory_bytes : 0,
          `${bytes(use.mem_used_bytes)} / ${bytes(g.memory_bytes)}`),
        bar((100 - (w.gpus[i].free_share ?? 100)) / 100,
          `${100 - (g.free_share ?? 100)}% allocated`, 'alloc'));
    }),
    h('div', { class: 'tasks' }, h('span', { class: 'k' }, 'Tasks'),
      w.tasks.length === 0 ? h('span', { class: 'muted' }, 'idle')
        : w.tasks.map((t) => h('a', { class: 'task-link', href: `#/tasks/${t}` }, t))));
}

export function workersView(el) {
  const summary = h('p', { class: 'summary' });
  const grid = h('div', { class: 'grid', id: 'workers' });
  const err = h('p', { class: 'error' });
  // A refused drain's message stays until the next click (a refresh clears
  // only its own errors).
  const refused = h('p', { class: 'error', id: 'action-error' });
  replace(el, h('h2', {}, 'Workers'), summary, refused, err, grid);

  const toggle = async (w) => {
    try {
      await api(`/api/v1/workers/${w.id}/${w.drained ? 'undrain' : 'drain'}`, { method: 'POST' });
      refused.textContent = '';
    } catch (e) {
      refused.textContent = `${w.drained ? 'Undrain' : 'Drain'} ${w.name}: ${e.message}`;
    }
    r.poke();
  };
  const r = refresher(async () => {
    const { workers } = await api('/api/v1/workers');
    const counts = { online: 0, drained: 0, paused: 0, unhealthy: 0, quarantined: 0, lost: 0 };
    for (const w of workers) counts[workerState(w)]++;
    summary.textContent = `${workers.length} workers: ${counts.online} online, ` +
      `${counts.drained} drained, ` +
      (counts.paused ? `${counts.paused} in use by their owners, ` : '') +
      (counts.unhealthy ? `${counts.unhealthy} unhealthy, ` : '') +
      (counts.quarantined ? `${counts.quarantined} quarantined, ` : '') + `${counts.lost} lost`;
    summary.dataset.count = String(workers.length);
    morph(grid, workers.map((w) => card(w, isAdmin() ? toggle : null)));
    err.textContent = '';
  }, { everyMs: 3000, onError: (e) => { err.textContent = `Workers: ${e.message}`; } });
  return { onEvent: () => r.poke(), dispose: () => r.dispose() };
}
