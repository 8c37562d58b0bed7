// A view's data loader: runs `load` now, again every `everyMs` (for numbers
// that change without an event, such as utilization), and soon after
// `poke()` (an event arrived). Never two loads at once; errors are shown by
// `onError` and retried on the next turn.
export function refresher(load, { everyMs = 0, onError = () => {} } = {}) {
  let running = false;
  let again = false;
  let pokeTimer = null;
  let disposed = false;
  const run = async () => {
    if (disposed) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      await load();
    } catch (e) {
      onError(e);
    } finally {
      running = false;
      if (again) {
        again = false;
        run();
      }
    }
  };
  const interval = everyMs > 0 ? setInterval(run, everyMs) : null;
  run();
  return {
    poke() {
      if (pokeTimer) return;
      pokeTimer = setTimeout(() => {
        pokeTimer = null;
        run();
      }, 150);
    },
    dispose() {
      disposed = true;
      if (interval) clearInterval(interval);
      if (pokeTimer) clearTimeout(pokeTimer);
    },
  };
}
