// Bus time on a virtual-time hub (docs/virtual-time.md): the bus's time,
// its real-time factor and who holds it, with pause, run, step and
// run-until buttons (GET and POST /api/v1/time). On a hub in real time the
// panel stays hidden.

import { api, say } from './api.js';

/// Nanoseconds as seconds with microseconds.
const seconds = (ns) => (ns / 1e9).toFixed(6);

export class BusTime {
  constructor(root) {
    this.root = root;
    this.now = root.querySelector('#bus-now');
    this.factor = root.querySelector('#bus-factor');
    this.state = root.querySelector('#bus-state');
    this.until = root.querySelector('#bus-until');
    for (const button of root.querySelectorAll('button[data-time]')) {
      button.addEventListener('click', () => this.act(button.dataset.time));
    }
  }

  /// Read the hub's time status (each poll).
  async refresh() {
    this.show(await api('GET', '/api/v1/time'));
  }

  show(status) {
    this.root.hidden = status.mode !== 'virtual';
    if (this.root.hidden) return;
    this.now.textContent = seconds(status.now_ns);
    const factor = status.real_time_factor;
    this.factor.textContent = factor === null || factor === undefined ? '–' : `${Number(factor).toPrecision(3)}×`;
    const limit = status.limit || {};
    const waiting = status.awaiting && status.awaiting.length ? `, waiting for ${status.awaiting.join(', ')}` : '';
    this.state.textContent = (limit.state === 'until' ? `running until ${seconds(limit.until_ns)} s` : limit.state || '')
      + waiting;
    this.state.dataset.state = limit.state || '';
  }

  async act(action) {
    const body = { action };
    if (action === 'run_until') {
      const target = Number(this.until.value);
      if (!this.until.value.trim() || !Number.isFinite(target) || target < 0) {
        say('run until: give the bus time to stop at, in seconds', true);
        return;
      }
      body.until_ns = Math.round(target * 1e9);
    }
    try {
      this.show(await api('POST', '/api/v1/time', body));
      say(`bus time: ${action.replace('_', ' ')}: done`);
    } catch (e) {
      say(`bus time: ${action.replace('_', ' ')}: ${e.message}`, true);
    }
  }
}
