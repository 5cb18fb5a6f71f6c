// Bus load per channel over time, as the hub computes it from each frame's
// exact bit time (stuff bits included): the 1 s and 10 s figures of
// GET /api/v1/stats, sampled every second and drawn as a chart; below it,
// every port's error counters and controller state.

import { el } from './api.js';

/// Samples kept per channel: two minutes.
const HISTORY = 120;
const COLORS = ['#2a7ae2', '#e2772a', '#2aa84a', '#c23bd4', '#d4b83b', '#3bc2d4'];

export class Load {
  constructor(root) {
    this.canvas = root.querySelector('#load-chart');
    this.legend = root.querySelector('#load-legend');
    this.portRows = root.querySelector('#error-rows');
    this.history = new Map();
  }

  /// Take one statistics document.
  add(stats) {
    for (const channel of stats.channels) {
      const samples = this.history.get(channel.name) || [];
      samples.push({ s1: channel.load_1s, s10: channel.load_10s });
      if (samples.length > HISTORY) samples.shift();
      this.history.set(channel.name, samples);
    }
    this.legend.replaceChildren(...stats.channels.map((channel, i) => el('span', {
      class: 'legend', style: `color: ${COLORS[i % COLORS.length]}`, 'data-channel': channel.name,
    }, `${channel.name}: ${channel.load_1s.toFixed(1)} % (1 s), ${channel.load_10s.toFixed(1)} % (10 s), `
      + `${channel.frames} frames, ${channel.bitrate / 1000} kbit/s`)));
    this.portRows.replaceChildren(...stats.ports.map((port) => el('tr', { 'data-port': port.name },
      el('td', {}, port.name),
      el('td', {}, port.channel),
      el('td', { class: `state-${port.error_state}` }, port.error_state),
      el('td', {}, String(port.tec)),
      el('td', {}, String(port.rec)),
      el('td', {}, String(port.rx_dropped)),
      el('td', {}, String(port.tx_dropped)),
      el('td', {}, String(port.tx_pending)),
    )));
    this.draw();
  }

  draw() {
    const canvas = this.canvas;
    const width = (canvas.width = canvas.clientWidth || 800);
    const height = (canvas.height = canvas.clientHeight || 240);
    const g = canvas.getContext('2d');
    g.clearRect(0, 0, width, height);
    const top = Math.max(10, ...[...this.history.values()].flat().map((s) => Math.max(s.s1, s.s10)));
    const scale = top > 50 ? 100 : top > 10 ? 50 : 10;
    g.strokeStyle = '#ddd';
    g.fillStyle = '#777';
    g.font = '11px sans-serif';
    for (let k = 0; k <= 4; k++) {
      const y = height - 20 - ((height - 30) * k) / 4;
      g.beginPath();
      g.moveTo(40, y);
      g.lineTo(width, y);
      g.stroke();
      g.fillText(`${(scale * k) / 4} %`, 2, y + 4);
    }
    const x = (i) => 40 + ((width - 45) * i) / (HISTORY - 1);
    const y = (v) => height - 20 - ((height - 30) * Math.min(v, scale)) / scale;
    [...this.history.values()].forEach((samples, c) => {
      const offset = HISTORY - samples.length;
      g.strokeStyle = COLORS[c % COLORS.length];
      for (const [key, dash] of [['s1', []], ['s10', [5, 4]]]) {
        g.setLineDash(dash);
        g.beginPath();
        samples.forEach((s, i) => (i ? g.lineTo(x(offset + i), y(s[key])) : g.moveTo(x(offset + i), y(s[key]))));
        g.stroke();
      }
    });
    g.setLineDash([]);
    g.fillText('solid: 1 s, dashed: 10 s; last two minutes', 45, height - 4);
  }
}
