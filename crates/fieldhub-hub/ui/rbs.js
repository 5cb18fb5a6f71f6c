// The rest-bus panel (docs/rest-bus.md): every running simulation (GET
// /api/v1/rbs) with its messages — node, identifier, cycle, frames sent —
// and each signal as last sent (alive counters, checksums and ramped
// signals as they went out, the others as set). A message's signals are set
// by name and physical value, and the message stopped or started, with POST
// /api/v1/rbs: the requests `fieldhub ctl rbs set|stop|start` makes. The
// tables are built again only when the simulations or their messages
// change; a poll updates the values in place, so a value being typed stays.

import { act, api, el, idText, say } from './api.js';

/// A physical value as the page shows it: at most six decimals.
const valueText = (v) => (typeof v === 'number' ? String(Number(v.toFixed(6))) : String(v));

export class RestBus {
  constructor(root) {
    this.list = root.querySelector('#rbs-sims');
    /// What the tables were built for: sims, messages and their signals.
    this.shape = null;
    /// Per `sim/message`: the cells a poll updates.
    this.rows = new Map();
    this.reason = '';
  }

  /// Disable the controls when the page's access may not control the hub.
  allow(access) {
    this.reason = access.control ? '' : `${access.access} may not control the hub: setting signals and stopping `
      + 'messages needs the hub\'s token or an [[access]] with control = true';
    this.shape = null;
  }

  /// Read the simulations (each poll while the panel is shown).
  async refresh() {
    const sims = await api('GET', '/api/v1/rbs');
    const shape = JSON.stringify(sims.map((s) => [s.sim, s.channel, s.messages.map((m) => [m.name, Object.keys(m.signals)])]));
    if (shape !== this.shape) {
      this.shape = shape;
      this.build(sims);
    }
    for (const sim of sims) for (const message of sim.messages) this.update(sim.sim, message);
  }

  build(sims) {
    this.rows.clear();
    if (!sims.length) {
      const text = 'No rest-bus simulation runs: start one with fieldhub rbs FILE.dbc, or [[rbs]] in the '
        + 'hub\'s configuration (docs/rest-bus.md).';
      this.list.replaceChildren(el('p', { class: 'hint' }, text));
      return;
    }
    const notice = this.reason ? el('p', { class: 'hint', id: 'rbs-no-control' }, this.reason) : null;
    this.list.replaceChildren(...[notice, ...sims.map((sim) => this.table(sim))].filter(Boolean));
  }

  table(sim) {
    const heads = ['message', 'node', 'id', 'cycle (ms)', 'sent', 'signals: as last sent, and a new value', ''];
    return el('div', { class: 'rbs-sim', 'data-sim': sim.sim },
      el('h3', {}, `Simulation ${sim.sim} on ${sim.channel}: ${sim.dbc}`),
      el('table', {},
        el('thead', {}, el('tr', {}, ...heads.map((h) => el('th', {}, h)))),
        el('tbody', {}, ...sim.messages.map((m) => this.row(sim.sim, m)))));
  }

  row(sim, message) {
    const name = message.name;
    const disabled = this.reason ? '' : undefined;
    const title = this.reason || undefined;
    const values = new Map();
    const signals = Object.keys(message.signals).map((signal) => {
      const value = el('span', { class: 'rbs-value' });
      values.set(signal, value);
      const input = el('input', { size: 7, 'data-signal': signal, placeholder: 'new value', disabled, title });
      input.addEventListener('keydown', (e) => e.key === 'Enter' && this.set(sim, name, row));
      return el('div', { class: 'rbs-signal', 'data-signal': signal },
        el('span', { class: 'rbs-name', title: signal }, signal), value, input);
    });
    const sent = el('td', { class: 'rbs-sent' });
    const toggle = el('button', { 'data-action': 'toggle', disabled, title, onclick: () => this.toggle(sim, name) });
    const set = el('button', { 'data-action': 'set', disabled, title, onclick: () => this.set(sim, name, row) }, 'Set');
    const row = el('tr', { 'data-message': name },
      el('td', {}, name), el('td', {}, message.node), el('td', {}, idText(message.id, message.extended ? 1 : 0)),
      el('td', {}, message.cycle_ms ?? 'on change'), sent, el('td', {}, ...signals), el('td', {}, set, ' ', toggle));
    this.rows.set(`${sim}/${name}`, { row, values, sent, toggle });
    return row;
  }

  /// Show a message as the API lists it.
  update(sim, message) {
    const cells = this.rows.get(`${sim}/${message.name}`);
    if (!cells) return;
    cells.sent.textContent = String(message.sent);
    cells.toggle.textContent = message.enabled ? 'Stop' : 'Start';
    cells.row.dataset.enabled = String(message.enabled);
    for (const [signal, value] of Object.entries(message.signals)) {
      const ramp = message.ramps?.[signal];
      const text = valueText(value) + (ramp ? ` (ramping to ${valueText(ramp.to)})` : '');
      const span = cells.values.get(signal);
      if (span && span.textContent !== text) span.textContent = text;
    }
  }

  /// Set the signals given a new value in the message's row.
  async set(sim, name, row) {
    const inputs = [...row.querySelectorAll('input[data-signal]')].filter((i) => i.value.trim() !== '');
    const values = {};
    for (const input of inputs) values[input.dataset.signal] = Number(input.value);
    const bad = inputs.find((i) => !Number.isFinite(values[i.dataset.signal]));
    if (!inputs.length || bad) {
      const text = bad ? `'${bad.value}' is not a number for ${bad.dataset.signal}` : 'type a new value first';
      say(`set ${name}: ${text}`, true);
      return;
    }
    const answer = await act(`set ${name} ${Object.entries(values).map(([s, v]) => `${s}=${v}`).join(' ')}`,
      () => api('POST', '/api/v1/rbs', { sim, message: name, set: values }));
    if (!answer) return;
    for (const input of inputs) input.value = '';
    this.update(sim, answer);
  }

  /// Stop a message that is sent, start one that is stopped.
  async toggle(sim, name) {
    const enabled = this.rows.get(`${sim}/${name}`).row.dataset.enabled !== 'true';
    const answer = await act(`${enabled ? 'start' : 'stop'} ${name}`,
      () => api('POST', '/api/v1/rbs', { sim, message: name, enabled }));
    if (answer) this.update(sim, answer);
  }
}
