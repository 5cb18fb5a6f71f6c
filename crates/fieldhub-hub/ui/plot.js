// The plot view (SavvyCAN's graphing): signals over time, several on one
// time axis. A series is a DBC signal of a channel (the hub decodes it and
// sends the physical value with each frame) or raw bits of an identifier
// (little-endian, DBC's @1 numbering: bit 0 is byte 0's lowest). Points
// come from the live trace — the frames the hub sends the page, at most 250
// a tick on a flood — or from a recording opened from the page, which the
// hub reads and decodes (recording.js): a series plots the recording's
// frames, including series added after it was opened, until Resume goes
// back to live frames. Drawn with uPlot (vendored, see ui.rs), at most
// four times a second and only while the view is shown.
//
// Invariants: at most MAX_POINTS points per series (the oldest go), at
// most MAX_SIGNALS signal names offered (a DBC's, as frames show them).

import { download, el, say } from './api.js';

const MAX_POINTS = 20000;
const MAX_SIGNALS = 2000;
const DRAW_MS = 250;
const COLOURS = ['#2a7ae2', '#e2772a', '#2aa84a', '#b42bd2', '#d22b5a', '#1a9aa0', '#8a6d1a', '#5a5ad2'];

/// Raw bits `start:length` of a payload given as hex, little-endian; null
/// when the payload is too short.
export function rawBits(hex, start, length) {
  if ((start + length) > (hex.length / 2) * 8) return null;
  let value = 0;
  for (let i = length - 1; i >= 0; i--) {
    const bit = start + i;
    const byte = parseInt(hex.slice((bit >> 3) * 2, (bit >> 3) * 2 + 2), 16);
    value = value * 2 + ((byte >> (bit & 7)) & 1);
  }
  return value;
}

export class Plot {
  constructor(root, channelName) {
    this.root = root;
    this.channelName = channelName;
    this.series = [];
    /// Signals the frames showed: "channel\tmessage\tsignal" → label.
    this.signals = new Map();
    this.paused = false;
    /// The opened recording's frames while it is shown, else null.
    this.recording = null;
    this.chart = null;
    this.drawnAt = 0;
    this.timer = 0;
    this.picker = root.querySelector('#plot-signal');
    this.list = root.querySelector('#plot-series');
    this.area = root.querySelector('#plot-chart');
    root.querySelector('#plot-add-signal').addEventListener('click', () => this.addSignal());
    root.querySelector('#plot-add-raw').addEventListener('click', () => this.addRaw(root));
    this.pause = root.querySelector('#plot-pause');
    this.pause.addEventListener('click', () => {
      this.setPaused(!this.paused);
      if (!this.paused && this.recording) {
        this.recording = null;
        this.clearPoints();
      }
    });
    root.querySelector('#plot-clear').addEventListener('click', () => this.clearPoints());
    root.querySelector('#plot-export').addEventListener('click', () => this.export());
  }

  setPaused(paused) {
    this.paused = paused;
    this.pause.textContent = paused ? 'Resume' : 'Pause';
    this.pause.classList.toggle('active', paused);
  }

  /// Offer the signals of a decoded frame (values: [message, [[signal,
  /// value], …]]) of channel `ch` in the picker.
  offer(ch, values) {
    if (!values || this.signals.size >= MAX_SIGNALS) return;
    for (const [name] of values[1]) {
      const key = `${ch}\t${values[0]}\t${name}`;
      if (!this.signals.has(key)) {
        this.signals.set(key, `${this.channelName(ch)} ${values[0]}.${name}`);
        this.picker.append(el('option', { value: key }, this.signals.get(key)));
      }
    }
  }

  /// Take a batch's frames: [channel, us, id, flags, hex, …, values] with
  /// values [message, [[signal, value], …]] on a channel with a DBC.
  add(batch) {
    for (const f of batch.frames) {
      const values = f[10];
      this.offer(f[0], values);
      if (!this.paused) this.take({ ch: f[0], us: f[1], id: f[2], flags: f[3], hex: f[4], values });
    }
    if (!this.paused) this.schedule();
  }

  /// Offer each series the frame.
  take(frame, series = this.series) {
    for (const s of series) {
      const value = s.value(frame);
      if (value === null || value === undefined) continue;
      s.t.push(frame.us);
      s.v.push(value);
      if (s.t.length > MAX_POINTS * 1.25) {
        s.t.splice(0, s.t.length - MAX_POINTS);
        s.v.splice(0, s.v.length - MAX_POINTS);
      }
    }
  }

  /// Plot a recording's frames ({ch, us, id, flags, hex, values}) instead
  /// of the live ones: the view pauses until Resume.
  showRecording(frames) {
    this.setPaused(true);
    this.recording = frames;
    this.clearPoints();
    for (const frame of frames) {
      this.offer(frame.ch, frame.values);
      this.take(frame);
    }
    this.draw();
  }

  addSignal() {
    const key = this.picker.value;
    if (!key) return say('plot: pick a signal (a DBC signal is offered once a frame of its message came, live or in a recording opened with a DBC)', true);
    const [ch, message, signal] = key.split('\t');
    const channel = Number(ch);
    this.addSeries(this.signals.get(key), (f) => {
      if (f.ch !== channel || !f.values || f.values[0] !== message) return null;
      const found = f.values[1].find(([name]) => name === signal);
      return found ? found[1] : null;
    });
    return undefined;
  }

  addRaw(root) {
    const idText = root.querySelector('#plot-raw-id').value.trim();
    const bits = /^(\d+):(\d+)$/.exec(root.querySelector('#plot-raw-bits').value.trim());
    if (!/^[0-9a-fA-F]{1,8}$/.test(idText) || !bits || Number(bits[2]) < 1 || Number(bits[2]) > 52) {
      return say('plot: give an id in hex and bits as start:length (length 1 to 52), e.g. 100 and 16:8', true);
    }
    const id = parseInt(idText, 16);
    const [start, length] = [Number(bits[1]), Number(bits[2])];
    this.addSeries(`${idText.toUpperCase()} bits ${start}:${length}`, (f) =>
      f.id === id && !(f.flags & 34) ? rawBits(f.hex, start, length) : null);
    return undefined;
  }

  addSeries(label, value) {
    if (this.series.some((s) => s.label === label)) return;
    const colour = COLOURS[this.series.length % COLOURS.length];
    const series = { label, value, colour, t: [], v: [] };
    this.series.push(series);
    const remove = el('button', { 'data-action': 'remove' }, 'remove');
    const item = el('li', { 'data-series': label, style: `border-left: 6px solid ${colour}` },
      el('span', { class: 'series-label' }, label), ' ', el('span', { class: 'series-points' }, '0'), ' points ', remove);
    remove.addEventListener('click', () => {
      this.series = this.series.filter((s) => s !== series);
      item.remove();
      this.rebuild();
    });
    series.item = item;
    this.list.append(item);
    if (this.recording) for (const frame of this.recording) this.take(frame, [series]);
    this.rebuild();
  }

  clearPoints() {
    for (const s of this.series) {
      s.t = [];
      s.v = [];
    }
    this.schedule();
  }

  /// Redraw at most every DRAW_MS, only while the view is shown.
  schedule() {
    if (this.timer || this.root.hidden) return;
    const wait = Math.max(0, this.drawnAt + DRAW_MS - performance.now());
    this.timer = setTimeout(() => requestAnimationFrame(() => {
      this.timer = 0;
      this.draw();
    }), wait);
  }

  /// A new chart for a new set of series.
  rebuild() {
    if (this.chart) this.chart.destroy();
    this.chart = null;
    this.draw();
  }

  /// The series on one time axis: every series' times merged, each series
  /// null where it has no point (uPlot draws across the gaps).
  aligned() {
    const times = [...new Set(this.series.flatMap((s) => s.t))].sort((a, b) => a - b);
    const index = new Map(times.map((t, i) => [t, i]));
    const start = times.length ? times[0] : 0;
    const columns = this.series.map((s) => {
      const column = new Array(times.length).fill(null);
      s.t.forEach((t, i) => { column[index.get(t)] = s.v[i]; });
      return column;
    });
    return [times.map((t) => (t - start) / 1e6), ...columns];
  }

  draw() {
    this.drawnAt = performance.now();
    for (const s of this.series) s.item.querySelector('.series-points').textContent = String(s.t.length);
    if (this.root.hidden || !this.series.length) return;
    const data = this.aligned();
    if (!this.chart) {
      const width = Math.max(400, this.area.clientWidth - 10);
      this.chart = new window.uPlot({
        width,
        height: 360,
        scales: { x: { time: false } },
        axes: [{ label: 'time (s) from the first point' }, {}],
        series: [{ label: 'time (s)' }, ...this.series.map((s) => ({ label: s.label, stroke: s.colour, spanGaps: true }))],
      }, data, this.area);
    } else {
      this.chart.setData(data);
    }
  }

  /// The plotted points as CSV: series, time (µs, the hub's), value.
  export() {
    const lines = ['series,time_us,value'];
    for (const s of this.series) s.t.forEach((t, i) => lines.push(`"${s.label}",${t},${s.v[i]}`));
    download('plot.csv', `${lines.join('\n')}\n`);
  }
}
