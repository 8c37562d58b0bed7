// Cluster utilization over time (CPU, memory, GPU; running and queued
// tasks) from the server's ring buffer, GET /api/v1/utilization, drawn with
// uPlot. New samples are fetched with ?since_ms= so only the tail travels.
import uPlot from 'uplot';
import { ApiError, api } from '../api.js';
import { h, replace } from '../dom.js';
import { refresher } from './refresh.js';

const MAX_POINTS = 3600;

function pct(part, total) {
  return total > 0 ? (100 * part) / total : null;
}

function chart(target, title, series, yLabel, range) {
  const width = Math.max(320, target.clientWidth || 900);
  return new uPlot({
    title,
    width,
    height: 260,
    scales: { x: { time: true }, y: range ? { range } : {} },
    axes: [{}, { label: yLabel }],
    series: [{}, ...series],
  }, [[], ...series.map(() => [])], target);
}

export function utilizationView(el) {
  const err = h('p', { class: 'error' });
  const resBox = h('div', { class: 'chart', id: 'chart-resources' });
  const taskBox = h('div', { class: 'chart', id: 'chart-tasks' });
  const note = h('p', { class: 'muted' });
  replace(el, h('h2', {}, 'Cluster utilization'), note, err, resBox, taskBox);

  // Memory used is measured on each whole machine and can exceed what the
  // workers offer, so the axis grows past 100 % when it does.
  const res = chart(resBox, 'Resources (% of the cluster)', [
    { label: 'CPU busy', stroke: '#2b7bd6', width: 2 },
    { label: 'CPU allocated', stroke: '#2b7bd6', dash: [6, 4] },
    { label: 'Memory used', stroke: '#2f9e44', width: 2 },
    { label: 'Memory allocated', stroke: '#2f9e44', dash: [6, 4] },
    { label: 'GPU busy', stroke: '#d9480f', width: 2 },
    { label: 'GPU allocated', stroke: '#d9480f', dash: [6, 4] },
  ], '%', (u, min, max) => [0, Math.max(100, Math.ceil(max / 10) * 10)]);
  const tasks = chart(taskBox, 'Tasks', [
    { label: 'running', stroke: '#7048e8', width: 2 },
    { label: 'queued', stroke: '#868e96', width: 2 },
  ], 'tasks');

  const cols = { t: [], r: [[], [], [], [], [], []], k: [[], []] };
  let since = 0;
  const r = refresher(async () => {
    let body;
    try {
      body = await api(`/api/v1/utilization${since ? `?since_ms=${since}` : ''}`);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        note.textContent = 'This server keeps no utilization history (no /api/v1/utilization).';
        return;
      }
      throw e;
    }
    note.textContent = `One sample every ${(body.interval_ms / 1000).toFixed(0)} s.`;
    for (const s of body.samples) {
      if (s.t_ms <= since) continue;
      since = s.t_ms;
      cols.t.push(s.t_ms / 1000);
      const v = [s.cpu_busy_percent, pct(s.cpus_allocated, s.cpus_total),
        pct(s.mem_used_bytes, s.mem_total_bytes), pct(s.mem_allocated_bytes, s.mem_total_bytes),
        s.gpus_total > 0 ? s.gpu_util_percent : null, pct(s.gpus_allocated, s.gpus_total)];
      v.forEach((x, i) => cols.r[i].push(x));
      cols.k[0].push(s.tasks_running);
      cols.k[1].push(s.tasks_queued);
    }
    if (cols.t.length > MAX_POINTS) {
      const cut = cols.t.length - MAX_POINTS;
      cols.t.splice(0, cut);
      for (const c of [...cols.r, ...cols.k]) c.splice(0, cut);
    }
    res.setData([cols.t, ...cols.r]);
    tasks.setData([cols.t, ...cols.k]);
    el.dataset.samples = String(cols.t.length);
    err.textContent = '';
  }, { everyMs: 2000, onError: (e) => { err.textContent = `Utilization: ${e.message}`; } });

  const resize = () => {
    const w = Math.max(320, resBox.clientWidth);
    res.setSize({ width: w, height: 260 });
    tasks.setSize({ width: w, height: 260 });
  };
  window.addEventListener('resize', resize);
  return {
    dispose: () => {
      r.dispose();
      window.removeEventListener('resize', resize);
      res.destroy();
      tasks.destroy();
    },
  };
}
