// Wiring and faults: the hub's channels and ports as a picture, with the
// control API's operations as buttons — plug/unplug, cut/repair,
// short/unshort, bridges (gateway routes), fault rules and recordings.
// Every button is one control API request; the view then reloads.

import { act, api, apiText, download, el } from './api.js';

const NS = 'http://www.w3.org/2000/svg';

function svg(tag, attrs, text) {
  const node = document.createElementNS(NS, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

const hex = (text) => (text.trim() === '' ? 0 : parseInt(text.trim(), 16));

export class Wiring {
  constructor(root) {
    this.root = root;
    this.channels = [];
    this.picture = root.querySelector('#wiring-picture');
    this.portRows = root.querySelector('#port-rows');
    this.channelRows = root.querySelector('#channel-rows');
    this.routeRows = root.querySelector('#route-rows');
    this.faultRows = root.querySelector('#fault-rows');
    this.recordingRows = root.querySelector('#recording-rows');
    this.recorded = new Set();
    root.querySelector('#bridge-form').addEventListener('submit', (e) => this.bridge(e));
    root.querySelector('#fault-form').addEventListener('submit', (e) => this.addFault(e));
    root.querySelector('#recording-form').addEventListener('submit', (e) => this.record(e));
    root.querySelector('#fault-action').addEventListener('change', (e) => {
      root.querySelector('#fault-delay').disabled = e.target.value !== 'delay';
    });
  }

  /// Reload everything from the hub.
  async refresh() {
    const [channels, ports, routes, faults, recordings] = await Promise.all([
      api('GET', '/api/v1/channels'),
      api('GET', '/api/v1/ports'),
      api('GET', '/api/v1/routes'),
      api('GET', '/api/v1/faults'),
      api('GET', '/api/v1/recordings'),
    ]);
    this.channels = channels;
    this.draw(channels, ports, routes);
    this.listPorts(ports, channels);
    this.listChannels(channels);
    this.listRoutes(routes);
    this.listFaults(faults);
    this.listRecordings(recordings);
    for (const select of this.root.querySelectorAll('select.channel-choice')) {
      const chosen = select.value;
      select.replaceChildren(...channels.map((c) => el('option', { value: c.name }, c.name)));
      if (chosen && channels.some((c) => c.name === chosen)) select.value = chosen;
    }
  }

  async run(what, action) {
    await act(what, action);
    await this.refresh().catch(() => {});
  }

  /// Channels as bus lines, ports as boxes wired to them; an unplugged
  /// port's wire is dashed, a cut-off port's segment red, a shorted bus red.
  draw(channels, ports, routes) {
    const laneH = 110;
    const width = Math.max(640, 140 + Math.max(1, ...channels.map((c) => c.ports.length)) * 130);
    this.picture.replaceChildren();
    this.picture.setAttribute('viewBox', `0 0 ${width} ${Math.max(1, channels.length) * laneH + 10}`);
    this.picture.setAttribute('width', String(width));
    this.picture.setAttribute('height', String(Math.max(1, channels.length) * laneH + 10));
    channels.forEach((channel, i) => {
      const y = i * laneH + 80;
      const bus = svg('line', {
        x1: 110, y1: y, x2: width - 20, y2: y,
        class: channel.shorted ? 'bus shorted' : 'bus',
      });
      this.picture.append(bus);
      this.picture.append(svg('text', { x: 10, y: y + 5, class: 'bus-label' }, channel.name));
      const detail = `${channel.protocol} ${channel.bitrate / 1000} kbit/s ${channel.timing}`
        + `${channel.shorted ? ' · SHORTED' : ''}${channel.cut ? ' · CUT' : ''}`;
      this.picture.append(svg('text', { x: 10, y: y + 22, class: 'bus-detail' }, detail));
      ports.filter((p) => p.channel === channel.name).forEach((port, k) => {
        const x = 140 + k * 130;
        const cls = !port.plugged ? 'wire unplugged' : port.segment ? 'wire cut' : 'wire';
        this.picture.append(svg('line', { x1: x + 50, y1: y - 30, x2: x + 50, y2: y, class: cls }));
        const state = port.error_state === 'active' ? '' : ` ${port.error_state}`;
        const g = svg('g', { class: `port-box${port.plugged ? '' : ' unplugged'}`, 'data-port': port.name });
        g.append(svg('rect', { x, y: y - 66, width: 100, height: 36, rx: 5 }));
        g.append(svg('text', { x: x + 50, y: y - 51, 'text-anchor': 'middle' }, port.name));
        g.append(svg('text', { x: x + 50, y: y - 37, 'text-anchor': 'middle', class: 'port-detail' },
          `${port.plugged ? 'plugged' : 'unplugged'}${state}`));
        this.picture.append(g);
      });
    });
    for (const route of routes) {
      const from = channels.findIndex((c) => c.name === route.from);
      const to = channels.findIndex((c) => c.name === route.to);
      if (from < 0 || to < 0) continue;
      const x = width - 40;
      this.picture.append(svg('line', { x1: x, y1: from * laneH + 80, x2: x, y2: to * laneH + 80, class: 'bridge' }));
    }
  }

  listPorts(ports, channels) {
    // What the user ticked or chose survives the reload.
    const ticked = new Set([...this.portRows.querySelectorAll('.cut-choice:checked')].map((c) => c.value));
    const chosen = new Map([...this.portRows.querySelectorAll('.plug-channel')].map((s) => [s.dataset.port, s.value]));
    this.portRows.replaceChildren(...ports.map((port) => {
      const target = el('select', { class: 'plug-channel', 'data-port': port.name, 'aria-label': `channel for ${port.name}` },
        ...channels.map((c) => el('option', { value: c.name }, c.name)));
      target.value = chosen.get(port.name) || port.channel;
      const tick = el('input', { type: 'checkbox', class: 'cut-choice', value: port.name, 'aria-label': `cut off ${port.name}` });
      tick.checked = ticked.has(port.name);
      const name = encodeURIComponent(port.name);
      return el('tr', { 'data-port': port.name },
        el('td', {}, tick),
        el('td', {}, port.name),
        el('td', {}, port.channel),
        el('td', {}, port.plugged ? 'plugged' : 'unplugged'),
        el('td', {}, `${port.error_state} (TEC ${port.tec}, REC ${port.rec})`),
        el('td', {}, `${port.tx_frames} / ${port.rx_frames}`),
        el('td', {}, `${port.rx_dropped} / ${port.tx_dropped}`),
        el('td', {},
          port.plugged
            ? el('button', { 'data-action': 'unplug', onclick: () => this.run(`unplug ${port.name}`, () => api('POST', `/api/v1/ports/${name}/unplug`)) }, 'Unplug')
            : el('button', { 'data-action': 'plug', onclick: () => this.run(`plug ${port.name}`, () => api('POST', `/api/v1/ports/${name}/plug`, { channel: target.value })) }, 'Plug'),
          ' into ', target),
      );
    }));
  }

  listChannels(channels) {
    this.channelRows.replaceChildren(...channels.map((channel) => {
      const name = encodeURIComponent(channel.name);
      const cutOff = () => [...this.portRows.querySelectorAll('.cut-choice:checked')].map((c) => c.value)
        .filter((p) => channel.ports.includes(p));
      return el('tr', { 'data-channel': channel.name },
        el('td', {}, channel.name),
        el('td', {}, channel.ports.join(', ')),
        el('td', {}, `${channel.frames}`),
        el('td', {}, channel.cut ? `cut off: ${channel.cut_off_ports.join(', ')}` : 'whole'),
        el('td', {}, channel.shorted ? 'shorted' : ''),
        el('td', {},
          channel.cut
            ? el('button', { 'data-action': 'repair', onclick: () => this.run(`repair ${channel.name}`, () => api('POST', `/api/v1/channels/${name}/repair`)) }, 'Repair')
            : el('button', { 'data-action': 'cut', title: 'cut off the ports ticked in the table of ports', onclick: () => this.run(`cut ${channel.name}`, () => api('POST', `/api/v1/channels/${name}/cut`, { ports: cutOff() })) }, 'Cut'),
          channel.shorted
            ? el('button', { 'data-action': 'unshort', onclick: () => this.run(`unshort ${channel.name}`, () => api('POST', `/api/v1/channels/${name}/unshort`)) }, 'Unshort')
            : el('button', { 'data-action': 'short', onclick: () => this.run(`short ${channel.name}`, () => api('POST', `/api/v1/channels/${name}/short`)) }, 'Short'),
        ),
      );
    }));
  }

  listRoutes(routes) {
    this.routeRows.replaceChildren(...routes.map((route) => el('tr', {},
      el('td', {}, String(route.route)),
      el('td', {}, `${route.from} → ${route.to}`),
      el('td', {}, `${route.id.toString(16).toUpperCase()} / ${route.mask.toString(16).toUpperCase()}`),
      el('td', {}, `${route.routed} routed, ${route.dropped} dropped`),
      el('td', {}, el('button', { onclick: () => this.run(`remove bridge ${route.route}`, () => api('DELETE', `/api/v1/routes/${route.route}`)) }, 'Remove')),
    )));
  }

  listFaults(faults) {
    this.faultRows.replaceChildren(...faults.map((fault) => el('tr', { 'data-fault': String(fault.id) },
      el('td', {}, String(fault.id)),
      el('td', {}, fault.channel),
      el('td', {}, fault.rule.at),
      el('td', {}, `${fault.rule.id.toString(16).toUpperCase()} / ${fault.rule.mask.toString(16).toUpperCase()}`),
      el('td', {}, JSON.stringify(fault.rule.action)),
      el('td', {}, String(fault.rule.probability)),
      el('td', { class: 'fault-matched' }, String(fault.matched)),
      el('td', { class: 'fault-applied' }, String(fault.applied)),
      el('td', {}, el('button', { 'data-action': 'remove-fault', onclick: () => this.run(`remove fault ${fault.id}`, () => api('DELETE', `/api/v1/faults/${fault.id}`)) }, 'Remove')),
    )));
  }

  listRecordings(recordings) {
    for (const r of recordings) this.recorded.add(r.name);
    const listed = new Map(recordings.map((r) => [r.name, r]));
    this.recordingRows.replaceChildren(...[...this.recorded].map((path) => {
      const r = listed.get(path);
      // The hub lists a stopped recording until its file is finished, and
      // the last finished ones after that, with how each ended.
      const recording = r && r.state === 'recording';
      const state = !r ? 'finished'
        : recording ? `recording ${r.channels.join(', ')} (${r.format})`
          : r.state === 'stopping' ? 'finishing its file'
            : r.state === 'failed' ? `failed: ${r.error}`
              : `finished (${r.frames} frames)`;
      return el('tr', { 'data-recording': path, 'data-state': r ? r.state : 'stopped' },
        el('td', {}, path),
        el('td', {}, state),
        el('td', {}, r ? String(r.dropped) : ''),
        el('td', {},
          recording ? el('button', { 'data-action': 'stop', onclick: () => this.run(`stop ${path}`, () => api('DELETE', `/api/v1/recordings/${r.id}`)) }, 'Stop') : null,
          el('button', { 'data-action': 'download', onclick: () => act(`download ${path}`, async () => download(path.split('/').pop(), await apiText(`/api/v1/recording-file?path=${encodeURIComponent(path)}`))) }, 'Download'),
        ),
      );
    }));
  }

  bridge(event) {
    event.preventDefault();
    const form = event.target;
    const spec = { from: form.from.value, to: form.to.value, id: hex(form.id.value), mask: hex(form.mask.value) };
    this.run(`bridge ${spec.from} → ${spec.to}`, () => api('POST', '/api/v1/routes', spec));
  }

  addFault(event) {
    event.preventDefault();
    const form = event.target;
    const type = form.action.value;
    const action = type === 'delay' ? { type, ms: Number(form.delay.value) }
      : type === 'duplicate' ? { type, copies: 1 } : { type };
    const spec = {
      channel: form.channel.value,
      at: form.at.value,
      id: hex(form.id.value),
      mask: hex(form.mask.value),
      action,
      probability: Number(form.probability.value),
    };
    this.run(`add fault on ${spec.channel}`, () => api('POST', '/api/v1/faults', spec));
  }

  record(event) {
    event.preventDefault();
    const form = event.target;
    const channels = form.channels.value.split(',').map((c) => c.trim()).filter(Boolean);
    const path = form.path.value.trim();
    this.run(`record ${path}`, async () => {
      await api('POST', '/api/v1/recordings', { path, channels });
      this.recorded.add(path);
    });
  }
}
