// The job timeline: one row per task that started, its bar from start to
// end (now, while it runs); tasks on the critical path are highlighted.
// rows: [{id, name, state, start_ms, end_ms, critical}]
import { h, seconds } from './dom.js';

export function gantt(rows, nowMs) {
  const started = rows.filter((r) => r.start_ms);
  if (started.length === 0) return h('p', { class: 'muted' }, 'No task has started yet.');
  const t0 = Math.min(...started.map((r) => r.start_ms));
  const t1 = Math.max(...started.map((r) => r.end_ms || nowMs));
  const span = Math.max(1, t1 - t0);
  const pct = (t) => `${((100 * (t - t0)) / span).toFixed(2)}%`;
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) =>
    h('span', { class: 'tick', style: { left: `${f * 100}%` } }, seconds((f * span) / 1000)));
  return h('div', { class: 'gantt', id: 'gantt' },
    h('div', { class: 'gantt-row axis' }, h('span', { class: 'gantt-name' }, ''),
      h('div', { class: 'gantt-track' }, ticks)),
    started.map((r) => {
      const end = r.end_ms || nowMs;
      return h('div', { class: `gantt-row${r.critical ? ' critical' : ''}`, 'data-task': r.id },
        h('a', { class: 'gantt-name', href: `#/tasks/${r.id}` }, `${r.id} ${r.name || ''}`),
        h('div', { class: 'gantt-track' },
          h('div', { class: `gantt-bar seg-${r.state}${r.critical ? ' critical' : ''}`,
            title: `${r.id}: ${seconds((end - r.start_ms) / 1000)}${r.critical ? ' (critical path)' : ''}`,
            style: { left: pct(r.start_ms), width: `max(2px, ${pct(end + t0 - r.start_ms)})` } })));
    }),
    h('p', { class: 'legend muted' }, h('span', { class: 'swatch critical' }), ' critical path'));
}
