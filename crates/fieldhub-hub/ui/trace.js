// The trace view: the newest frames of the monitored channels, drawn as a
// virtual list (only the rows in sight exist in the page) at most once per
// animation frame, so a busy bus costs one small redraw per frame. Frames
// the hub left out of a batch, the bus dropped for the monitor, or that
// arrived while paused are counted as "not drawn". The last KEEP frames
// stay for scrolling back (pause to hold the view), sorting by any column
// and exporting.

import { channelColour, dataText, download, el, flagText, idText, rowMark, timed } from './api.js';
import { compare, SortHeader } from './sort.js';

/// Frames kept for scrolling back and exporting.
const KEEP = 20000;
const ROW_PX = 20;
/// How often new frames redraw the trace, at most (ms).
const LIVE_MS = 100;
/// How often a live trace sorted by a column is sorted again (ms).
const SORT_MS = 500;
/// Columns sorted as numbers, and the span of the arrival index packed
/// with them (above KEEP * 1.25).
const NUMERIC_KEYS = ['ch', 'id', 'flags', 'len'];
const INDEX_SPAN = 32768;
/// The cells of a row, in order.
const CELLS = ['c-time', 'c-ch', 'c-sender', 'c-id', 'c-flags', 'c-len', 'c-data', 'c-decoded'];

export class Trace {
  constructor(root, channelName, senderName) {
    this.channelName = channelName;
    this.senderName = senderName;
    this.frames = [];
    this.visible = [];
    this.paused = false;
    this.notDrawn = 0;
    this.pausedDrops = 0;
    /// abs, rel (to the view's first frame), id (to the same id's previous
    /// frame) or delta (to the row above).
    this.timeMode = 'abs';
    /// The view's start: its first frame since the page opened or cleared.
    this.startUs = null;
    /// The time of each channel:id's newest frame, for Δ to the same id.
    this.lastOfId = new Map();
    /// `visible` in the chosen column's order, when one is chosen; stale
    /// when frames came since, and when it was sorted.
    this.sorted = null;
    this.stale = false;
    this.sortedAt = 0;
    /// When the trace was last drawn, and a pending live redraw's timer.
    this.renderedAt = 0;
    this.waiting = 0;
    this.filter = { id: null, mask: 0, text: '' };
    this.dirty = false;
    this.scroller = root.querySelector('#trace-scroll');
    this.spacer = root.querySelector('#trace-spacer');
    this.body = root.querySelector('#trace-rows');
    this.counter = document.getElementById('not-drawn');
    this.shown = root.querySelector('#trace-count');
    this.root = root;
    /// Whether the view follows the newest frame: until the user scrolls up.
    this.follow = true;
    /// Where the last redraw scrolled to, following.
    this.followedTo = -1;
    this.height = this.scroller.clientHeight;
    new ResizeObserver(() => {
      this.height = this.scroller.clientHeight;
      this.schedule();
    }).observe(this.scroller);
    this.scroller.addEventListener('scroll', () => {
      // The redraw's own scrolling to the newest frame needs no redraw.
      if (this.scroller.scrollTop === this.followedTo) return;
      const s = this.scroller;
      this.follow = s.scrollTop + s.clientHeight >= s.scrollHeight - ROW_PX * 2;
      this.schedule();
    });
    this.sort = new SortHeader(root.querySelector('#trace-head'), { key: null }, () => {
      this.sorted = null;
      this.schedule();
    });
    root.querySelector('#pause').addEventListener('click', (event) => this.togglePause(event));
    root.querySelector('#clear').addEventListener('click', () => this.clear());
    root.querySelector('#export').addEventListener('click', () => this.export());
    root.querySelector('#time-mode').addEventListener('change', (e) => {
      this.timeMode = e.target.value;
      this.schedule();
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
        const key = `${frame.ch}:${frame.id}:${frame.flags & 35}`;
        const before = this.lastOfId.get(key);
        frame.gap = before === undefined ? null : frame.us - before;
        // Bounded: a flood of random extended ids starts the gaps afresh.
        if (this.lastOfId.size >= 65536 && before === undefined) this.lastOfId.clear();
        this.lastOfId.set(key, frame.us);
        if (this.startUs === null) this.startUs = frame.us;
        this.frames.push(frame);
        if (this.matches(frame)) this.visible.push(frame);
      }
      if (this.frames.length > KEEP * 1.25) {
        this.frames.splice(0, this.frames.length - KEEP);
        if (this.visible.length > KEEP) this.visible.splice(0, this.visible.length - KEEP);
      }
    }
    this.notDrawn = lost + this.pausedDrops;
    this.stale = true;
    this.scheduleLive();
  }

  togglePause(event) {
    this.paused = !this.paused;
    event.target.textContent = this.paused ? 'Resume' : 'Pause';
    event.target.classList.toggle('active', this.paused);
  }

  clear() {
    this.frames = [];
    this.visible = [];
    this.sorted = null;
    this.startUs = null;
    this.lastOfId.clear();
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
    this.sorted = null;
    this.schedule();
  }

  /// The searchable text of a frame: what its row shows.
  line(frame) {
    const where = `${this.channelName(frame.ch)} ${this.senderName(frame.sender, frame.kind)}`;
    return `${where} ${idText(frame.id, frame.flags)} ${flagText(frame.flags)} ${frame.text} ${frame.decoded || ''}`;
  }

  /// Redraw for new frames: at most every LIVE_MS, which a reader cannot
  /// tell from 25 times a second and leaves the main thread to the user's
  /// clicks during a flood.
  scheduleLive() {
    if (this.dirty || this.waiting) return;
    const wait = this.renderedAt + LIVE_MS - performance.now();
    if (wait <= 0) {
      this.schedule();
      return;
    }
    this.waiting = setTimeout(() => {
      this.waiting = 0;
      this.schedule();
    }, wait);
  }

  /// Redraw on the next animation frame (once, however many asks come).
  schedule() {
    if (this.dirty) return;
    this.dirty = true;
    requestAnimationFrame(() => {
      this.dirty = false;
      timed('fieldhub-render-trace', () => this.render());
    });
  }

  /// The shown frames in the order of the chosen column. A live trace is
  /// re-sorted at most every SORT_MS, not per batch: thousands of frames
  /// sorted 25 times a second would hold the page.
  ordered() {
    if (!this.sort.key) return this.visible;
    const now = performance.now();
    if (!this.sorted || (this.stale && now - this.sortedAt >= SORT_MS)) {
      this.sorted = this.sortedBy(this.sort.key, this.sort.descending);
      this.sortedAt = now;
      this.stale = false;
    } else if (this.stale) {
      this.schedule();
    }
    return this.sorted;
  }

  /// The shown frames sorted by `key`; equal keys stay in arrival order.
  sortedBy(key, descending) {
    const frames = this.visible;
    // Arrival order is time order.
    if (key === 'us') return descending ? frames.slice().reverse() : frames;
    if (NUMERIC_KEYS.includes(key)) {
      // Key and arrival index packed into one number (an index fits 15
      // bits: at most KEEP * 1.25 frames), sorted natively: a trace of
      // 25,000 frames sorts in a few milliseconds.
      const packed = new Float64Array(frames.length);
      const sign = descending ? -1 : 1;
      for (let i = 0; i < frames.length; i++) packed[i] = sign * frames[i][key] * INDEX_SPAN + i;
      packed.sort();
      return Array.from(packed, (k) => frames[k - Math.floor(k / INDEX_SPAN) * INDEX_SPAN]);
    }
    const value = key === 'sender' ? (f) => this.senderName(f.sender, f.kind) : (f) => f[key] ?? '';
    const sign = descending ? -1 : 1;
    return frames.slice().sort((a, b) => sign * compare(value(a), value(b)) || a.us - b.us);
  }

  render() {
    this.counter.textContent = this.notDrawn.toLocaleString('en');
    if (this.root.hidden) return;
    this.renderedAt = performance.now();
    const frames = this.ordered();
    this.shown.textContent = frames.length.toLocaleString('en');
    this.spacer.style.height = `${frames.length * ROW_PX}px`;
    // Follow the newest frame unless the user scrolled up to read.
    if (this.follow) {
      this.scroller.scrollTop = frames.length * ROW_PX;
      this.followedTo = this.scroller.scrollTop;
    }
    const first = Math.max(0, Math.floor(this.scroller.scrollTop / ROW_PX));
    const last = Math.min(frames.length, first + Math.ceil(this.height / ROW_PX) + 1);
    for (let i = first; i < last; i++) {
      this.fill(this.rowElement(i - first), frames[i], i > 0 ? frames[i - 1] : null);
    }
    while (this.body.children.length > last - first) this.body.lastChild.remove();
    this.body.style.transform = `translateY(${first * ROW_PX}px)`;
  }

  /// The n-th row element in sight: made once, then reused by every redraw.
  rowElement(n) {
    if (n < this.body.children.length) return this.body.children[n];
    const row = el('div', { class: 'trace-row' }, ...CELLS.map((c) => el('span', { class: c })));
    this.body.append(row);
    return row;
  }

  /// Write a frame into a row, touching only what changed.
  fill(row, frame, previous) {
    const set = (node, text) => {
      if (node.textContent !== text) node.textContent = text;
    };
    const id = idText(frame.id, frame.flags);
    const channel = this.channelName(frame.ch);
    const rowClass = `trace-row${rowMark(frame.flags)}`;
    if (row.className !== rowClass) row.className = rowClass;
    if (row.dataset.id !== id) row.dataset.id = id;
    if (row.dataset.channel !== channel) row.dataset.channel = channel;
    const cells = row.children;
    set(cells[0], this.time(frame, previous));
    set(cells[1], channel);
    const colour = `4px solid ${channelColour(frame.ch)}`;
    if (cells[1].style.borderLeft !== colour) cells[1].style.borderLeft = colour;
    set(cells[2], this.senderName(frame.sender, frame.kind));
    set(cells[3], id);
    set(cells[4], flagText(frame.flags));
    set(cells[5], String(frame.len));
    set(cells[6], dataText(frame.flags, frame.hex, frame.len));
    set(cells[7], frame.decoded || '');
  }

  /// The time column in the chosen mode.
  time(frame, previous) {
    const seconds = (us) => `${us < 0 ? '-' : ''}${Math.floor(Math.abs(us) / 1e6)}.${String(Math.abs(us) % 1e6).padStart(6, '0')}`;
    const ms = (us) => `+${(us / 1000).toFixed(3)} ms`;
    switch (this.timeMode) {
      case 'rel': return seconds(frame.us - this.startUs);
      case 'id': return frame.gap === null ? 'first' : ms(frame.gap);
      case 'delta': return ms(previous ? frame.us - previous.us : 0);
      default: return seconds(frame.us);
    }
  }

  /// The visible trace as a candump log.
  export() {
    const lines = this.visible.map(
      (f) => `(${Math.floor(f.us / 1e6)}.${String(f.us % 1e6).padStart(6, '0')}) ${this.channelName(f.ch)} ${f.text}`,
    );
    download('trace.log', lines.join('\n') + (lines.length ? '\n' : ''));
  }
}
