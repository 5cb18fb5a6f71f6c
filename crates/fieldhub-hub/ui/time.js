// Bus time on a virtual-time hub (docs/virtual-time.md): the bus's time,
// its real-time factor and who holds it, with pause, run, step and
// run-until buttons — the requests `fieldhub ctl time …` makes (GET and
// POST /api/v1/time). Step with a length holds bus time and runs it that
// far from where it stopped; without one it is the API's single step (one
// advance). On a hub in real time the panel stays hidden; for an access
// that may not control the hub (GET /api/v1/access) the buttons are
// disabled and the panel says why.

import { api, say } from './api.js';

/// Nanoseconds as seconds with microseconds.
const seconds = (ns) => (ns / 1e9).toFixed(6);

export class BusTime {
  constructor(root) {
    this.root = root;
    this.now = root.querySelector('#bus-now');
    this.factor = root.querySelector('#bus-factor');
    this.state = root.querySelector('#bus-state');
    this.step = root.querySelector('#bus-step');
    this.until = root.querySelector('#bus-until');
    this.noControl = root.querySelector('#bus-no-control');
    this.controls = root.querySelectorAll('button[data-time], input');
    for (const button of root.querySelectorAll('button[data-time]')) {
      button.addEventListener('click', () => this.act(button.dataset.time));
    }
  }

  /// Disable the buttons when the page's access may not control the hub
  /// (`{access, control}` as GET /api/v1/access answers), saying why.
  allow(access) {
    const reason = access.control
      ? ''
      : `${access.access} may not control the hub: holding and stepping bus time needs the hub's token `
        + 'or an [[access]] with control = true';
    for (const control of this.controls) {
      control.disabled = !access.control;
      control.title = reason;
    }
    this.noControl.hidden = access.control;
    this.noControl.textContent = reason;
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

  /// The request for `action`, or a message saying what to type.
  async request(action) {
    if (action === 'run_until') {
      const target = Number(this.until.value);
      if (!this.until.value.trim() || !Number.isFinite(target) || target < 0) {
        throw new Error('give the bus time to stop at, in seconds');
      }
      return { action, until_ns: Math.round(target * 1e9) };
    }
    if (action === 'step' && this.step.value.trim()) {
      const length = Number(this.step.value);
      if (!Number.isFinite(length) || length <= 0) {
        throw new Error('give the step\'s length in milliseconds (or nothing for one advance)');
      }
      // Held first, so the step starts where bus time stopped, not where a
      // status read a moment earlier found it.
      const held = await api('POST', '/api/v1/time', { action: 'pause' });
      return { action: 'run_until', until_ns: held.now_ns + Math.round(length * 1e6) };
    }
    return { action };
  }

  async act(action) {
    const what = `bus time: ${action.replace('_', ' ')}`;
    try {
      this.show(await api('POST', '/api/v1/time', await this.request(action)));
      say(`${what}: done`);
    } catch (e) {
      say(`${what}: ${e.message}`, true);
    }
  }
}
