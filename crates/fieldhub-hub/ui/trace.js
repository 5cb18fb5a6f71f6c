// The trace view: the newest frames of the monitored channels, drawn as a
// virtual list (only the rows in sight exist in the page), so a busy bus
// costs one small redraw per batch. Frames the hub left out of a batch, the
// bus dropped for the monitor, or that arrived while paused are counted as
// "not drawn".

import { download, el, flagText, idText, spacedHex } from './api.js';

/// Frames kept for scrolling back and exporting.
const KEEP = 20000;
const ROW_PX = 20;

export class Trace {
  constructor(root, channelName, senderName) {
    this.channelName = channelName;
    this.senderName = senderName;
    this.frames = [];
    this.visible = [];
    this.paused = false;
    this.notDrawn = 0;
    this.pausedDrops = 0;
    this.delta = false;
    this.filter = { id: null, mask: 0, text: '' };
    this.dirty = false;
    this.scroller = root.querySelector('#trace-scroll');
    this.spacer = root.querySelector('#trace-spacer');
    this.body = root.querySelector('#trace-rows');
    this.counter = document.getElementById('not-drawn');
    this.shown = root.querySelector('#trace-count');
    this.scroller.addEventListener('scroll', () => this.render());
    root.querySelector('#pause').addEventListener('click', (event) => this.togglePause(event));
    root.querySelector('#clear').addEventListener('click', () => this.clear());
    root.querySelector('#export').addEventListener('click', () => this.export());
    root.querySelector('#time-mode').addEventListener('change', (e) => {
      this.delta = e.target.value === 'delta';
      this.refilter();
    });
    for (const id of ['filter-id', 'filter-mask', 'filter-text']) {
      root.querySelector(`#${id}`).addEventListener('input', () => this.readFilter(root));
    }
  }

  /// Take a batch from the monitor's WebSocket.
  add(batch, lost) {
    if (this.paused) {
      this.pausedDrops += batch.frames.length;
    } else {
      for (const f of batch.frames) {
        const frame = { ch: f[0], us: f[1], id: f[2], flags: f[3], hex: f[4], len: f[5], text: f[6], decoded: f[7], sender: f[8], kind: f[9] };
        this.frames.push(frame);
        if (this.matches(frame)) this.visible.push(frame);
      }
      if (this.frames.length > KEEP * 1.25) {
        this.frames.splice(0, this.frames.length - KEEP);
        if (this.visible.length > KEEP) this.visible.splice(0, this.visible.length - KEEP);
      }
    }
    this.notDrawn = lost + this.pausedDrops;
    this.schedule();
  }

  togglePause(event) {
    this.paused = !this.paused;
    event.target.textContent = this.paused ? 'Resume' : 'Pause';
    event.target.classList.toggle('active', this.paused);
  }

  clear() {
    this.frames = [];
    this.visible = [];
    this.schedule();
  }

  readFilter(root) {
    const hex = (id) => {
      const text = root.querySelector(`#${id}`).value.trim();
      return /^[0-9a-fA-F]{1,8}$/.test(text) ? parseInt(text, 16) : null;
    };
    const id = hex('filter-id');
    const mask = hex('filter-mask');
    this.filter = {
      id,
      mask: mask === null ? 0x1fffffff : mask,
      text: root.querySelector('#filter-text').value.trim().toLowerCase(),
    };
    this.refilter();
  }

  matches(frame) {
    const { id, mask, text } = this.filter;
    if (id !== null && (frame.id & mask) !== (id & mask)) return false;
    if (text && !this.line(frame).toLowerCase().includes(text)) return false;
    return true;
  }

  refilter() {
    this.visible = this.frames.filter((f) => this.matches(f));
    this.schedule();
  }

  /// The searchable text of a frame: what its row shows.
  line(frame) {
    const where = `${this.channelName(frame.ch)} ${this.senderName(frame.sender, frame.kind)}`;
    return `${where} ${idText(frame.id, frame.flags)} ${flagText(frame.flags)} ${frame.text} ${frame.decoded || ''}`;
  }

  schedule() {
    if (this.dirty) return;
    this.dirty = true;
    requestAnimationFrame(() => {
      this.dirty = false;
      this.render();
    });
  }

  render() {
    this.counter.textContent = this.notDrawn.toLocaleString('en');
    this.shown.textContent = this.visible.length.toLocaleString('en');
    const atBottom = this.scroller.scrollTop + this.scroller.clientHeight >= this.scroller.scrollHeight - ROW_PX * 2;
    this.spacer.style.height = `${this.visible.length * ROW_PX}px`;
    if (atBottom) this.scroller.scrollTop = this.scroller.scrollHeight;
    const first = Math.max(0, Math.floor(this.scroller.scrollTop / ROW_PX));
    const count = Math.ceil(this.scroller.clientHeight / ROW_PX) + 1;
    const rows = [];
    for (let i = first; i < Math.min(this.visible.length, first + count); i++) {
      rows.push(this.row(this.visible[i], i > 0 ? this.visible[i - 1] : null));
    }
    this.body.style.transform = `translateY(${first * ROW_PX}px)`;
    this.body.replaceChildren(...rows);
  }

  row(frame, previous) {
    const time = this.delta
      ? previous
        ? `+${((frame.us - previous.us) / 1000).toFixed(3)} ms`
        : '+0.000 ms'
      : `${Math.floor(frame.us / 1e6)}.${String(frame.us % 1e6).padStart(6, '0')}`;
    return el(
      'div',
      {
        class: `trace-row${frame.flags & 32 ? ' error-frame' : ''}`,
        'data-id': idText(frame.id, frame.flags),
        'data-channel': this.channelName(frame.ch),
      },
      el('span', { class: 'c-time' }, time),
      el('span', { class: 'c-ch' }, this.channelName(frame.ch)),
      el('span', { class: 'c-sender' }, this.senderName(frame.sender, frame.kind)),
      el('span', { class: 'c-id' }, idText(frame.id, frame.flags)),
      el('span', { class: 'c-flags' }, flagText(frame.flags)),
      el('span', { class: 'c-len' }, String(frame.len)),
      el('span', { class: 'c-data' }, frame.flags & 2 ? 'remote' : spacedHex(frame.hex)),
      el('span', { class: 'c-decoded' }, frame.decoded || ''),
    );
  }

  /// The visible trace as a candump log.
  export() {
    const lines = this.visible.map(
      (f) => `(${Math.floor(f.us / 1e6)}.${String(f.us % 1e6).padStart(6, '0')}) ${this.channelName(f.ch)} ${f.text}`,
    );
    download('trace.log', lines.join('\n') + (lines.length ? '\n' : ''));
  }
}
