// The rest-bus panel (docs/rest-bus.md): every running simulation (GET
// /api/v1/rbs) with its messages — node, identifier, cycle, frames sent —
// and each signal as last sent (alive counters, checksums and ramped
// signals as they went out, the others as set). A message's signals are set
// by name and physical value, and the message stopped or started, with POST
// /api/v1/rbs: the requests `fieldhub ctl rbs set|stop|start` makes. A
// message's alive counter and checksum, which the simulation computes, are
// marked with their rule (range, algorithm) instead of a field, and their
// faults — a stuck counter, a wrong checksum — are switched from the row as
// `fieldhub ctl rbs counter|checksum` does. The tables are built again only
// when the simulations or their messages change; a poll updates the values
// in place, so a value being typed stays.

import { act, api, el, idText, say } from './api.js';

/// A physical value as the page shows it: at most six decimals.
const valueText = (v) => (typeof v === 'number' ? String(Number(v.toFixed(6))) : String(v));

/// A checksum's rule as `[[rbs.checksum]]` writes it.
function checksumRule(c) {
  const hex = (n) => `0x${n.toString(16).toUpperCase().padStart(2, '0')}`;
  const crc = c.algorithm === 'crc8'
    ? `crc8 poly ${hex(c.poly)} init ${hex(c.init)} xorout ${hex(c.xorout)}${c.reflect ? ' reflected' : ''}`
    : c.algorithm;
  return c.data_id === null || c.data_id === undefined ? crc : `${crc}, data id ${c.data_id}`;
}

/// What the simulation computes of a message: signal → [kind, rule].
function computed(message) {
  const found = new Map();
  if (message.counter) {
    found.set(message.counter.signal, ['counter', `counter ${message.counter.min}..${message.counter.max}`]);
  }
  if (message.checksum) found.set(message.checksum.signal, ['checksum', `checksum ${checksumRule(message.checksum)}`]);
  return found;
}

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
    const rules = computed(message);
    const signals = Object.keys(message.signals).map((signal) => {
      const value = el('span', { class: 'rbs-value' });
      values.set(signal, value);
      const rule = rules.get(signal);
      if (rule) {
        return el('div', { class: `rbs-signal rbs-${rule[0]}`, 'data-signal': signal, 'data-role': rule[0] },
          el('span', { class: 'rbs-name', title: signal }, signal), value,
          el('span', { class: 'rbs-rule', title: 'computed by the simulation' }, rule[1]));
      }
      const input = el('input', { size: 7, 'data-signal': signal, placeholder: 'new value', disabled, title });
      input.addEventListener('keydown', (e) => e.key === 'Enter' && this.set(sim, name, row));
      return el('div', { class: 'rbs-signal', 'data-signal': signal },
        el('span', { class: 'rbs-name', title: signal }, signal), value, input);
    });
    const sent = el('td', { class: 'rbs-sent' });
    const toggle = el('button', { 'data-action': 'toggle', disabled, title, onclick: () => this.toggle(sim, name) });
    const set = el('button', { 'data-action': 'set', disabled, title, onclick: () => this.set(sim, name, row) }, 'Set');
    const fault = (action, key) => el('button', { 'data-action': action, disabled, title,
      onclick: () => this.fault(sim, name, key, row.dataset[action] !== 'true') });
    const counter = message.counter ? fault('counter', 'counter_stuck') : null;
    const checksum = message.checksum ? fault('checksum', 'checksum_wrong') : null;
    const row = el('tr', { 'data-message': name },
      el('td', {}, name), el('td', {}, message.node), el('td', {}, idText(message.id, message.extended ? 1 : 0)),
      el('td', {}, message.cycle_ms ?? 'on change'), sent, el('td', {}, ...signals),
      el('td', {}, set, ' ', toggle, counter && ' ', counter, checksum && ' ', checksum));
    this.rows.set(`${sim}/${name}`, { row, values, sent, toggle, counter, checksum });
    return row;
  }

  /// Show a message as the API lists it.
  update(sim, message) {
    const cells = this.rows.get(`${sim}/${message.name}`);
    if (!cells) return;
    cells.sent.textContent = String(message.sent);
    cells.toggle.textContent = message.enabled ? 'Stop' : 'Start';
    cells.row.dataset.enabled = String(message.enabled);
    // data-counter / data-checksum: the fault is on.
    cells.row.dataset.counter = String(message.counter_stuck);
    cells.row.dataset.checksum = String(message.checksum_wrong);
    if (cells.counter) cells.counter.textContent = message.counter_stuck ? 'Run counter' : 'Stick counter';
    if (cells.checksum) cells.checksum.textContent = message.checksum_wrong ? 'Right checksum' : 'Wrong checksum';
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

  /// Switch a fault of the message: `key` counter_stuck or checksum_wrong.
  async fault(sim, name, key, on) {
    const what = { counter_stuck: ['stick the counter of', 'run the counter of'],
      checksum_wrong: ['send a wrong checksum in', 'send the right checksum in'] }[key][on ? 0 : 1];
    const answer = await act(`${what} ${name}`, () => api('POST', '/api/v1/rbs', { sim, message: name, [key]: on }));
    if (answer) this.update(sim, answer);
  }

  /// Stop a message that is sent, start one that is stopped.
  async toggle(sim, name) {
    const enabled = this.rows.get(`${sim}/${name}`).row.dataset.enabled !== 'true';
    const answer = await act(`${enabled ? 'start' : 'stop'} ${name}`,
      () => api('POST', '/api/v1/rbs', { sim, message: name, enabled }));
    if (answer) this.update(sim, answer);
  }
}
