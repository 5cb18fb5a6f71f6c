// The overwrite view (like python -m can.viewer or SavvyCAN's overwrite
// mode): one row per identifier with its count, mean period, jitter, time
// since the previous frame and last data; bytes that differ from the
// identifier's previous frame are highlighted. The hub counts every frame
// the monitor took, drawn in the trace or not, and sends changed rows four
// times a second.
//
// Invariants that keep it fast with thousands of identifiers: a batch only
// updates the model (a Map by identifier); the table is a virtual list —
// only the rows in sight exist in the page — redrawn at most once per
// animation frame, and only while the view is shown.

import { channelColour, el, flagText, idText, timed } from './api.js';
import { compare, SortHeader } from './sort.js';

const ROW_PX = 20;
/// The columns of a row, in order (cell classes o-NAME).
const CELLS = ['ch', 'id', 'flags', 'count', 'period', 'jitter', 'delta', 'len', 'data', 'decoded'];

/// How each column sorts: a value of the row's record.
const SORT_KEYS = {
  ch: (r) => r.ch,
  id: (r) => r.id,
  flags: (r) => r.flags,
  count: (r) => r.count,
  period: (r) => r.period ?? -1,
  jitter: (r) => r.jitter ?? -1,
  delta: (r) => r.delta ?? -1,
  len: (r) => r.len,
  data: (r) => r.hex,
  decoded: (r) => r.decoded || '',
};

export class Overwrite {
  constructor(root, channelName) {
    this.root = root;
    this.channelName = channelName;
    /// Records by channel:id:flags, as the hub last sent them.
    this.records = new Map();
    /// The records in the drawn order; rebuilt when the order may change.
    this.order = [];
    this.reorder = false;
    this.frame = 0;
    this.scroller = root.querySelector('#overwrite-scroll');
    this.body = root.querySelector('#overwrite-rows');
    this.count = root.querySelector('#overwrite-count');
    this.sort = new SortHeader(root.querySelector('#overwrite-head'), { key: 'id', descending: false }, () => {
      this.reorder = true;
      this.schedule();
    });
    this.top = el('tr', { class: 'spacer' }, el('td', { colspan: CELLS.length }));
    this.bottom = el('tr', { class: 'spacer' }, el('td', { colspan: CELLS.length }));
    this.body.replaceChildren(this.top, this.bottom);
    this.height = this.scroller.clientHeight;
    new ResizeObserver(() => {
      this.height = this.scroller.clientHeight;
      this.schedule();
    }).observe(this.scroller);
    this.scroller.addEventListener('scroll', () => this.schedule());
    root.querySelector('#overwrite-clear').addEventListener('click', () => {
      this.records.clear();
      this.reorder = true;
      this.schedule();
    });
  }

  /// Take a batch's changed rows: [channel, id, flags, count, period_us,
  /// delta_us, last_us, data_hex, len, decoded, previous_data_hex, jitter_us].
  add(batch) {
    if (!batch.rows.length) return;
    for (const r of batch.rows) {
      const key = `${r[0]}:${r[1]}:${r[2] & 35}`;
      let record = this.records.get(key);
      if (!record) {
        record = { ch: r[0], id: r[1] };
        this.records.set(key, record);
        this.reorder = true;
      }
      record.flags = r[2];
      record.count = r[3];
      record.period = r[4];
      record.delta = r[5];
      record.hex = r[7];
      record.len = r[8];
      record.decoded = r[9];
      record.previous = r[10];
      record.jitter = r[11];
    }
    // Sorted by a column that changes with every frame: the order may too.
    if (!['ch', 'id'].includes(this.sort.key)) this.reorder = true;
    this.schedule();
  }

  /// Redraw on the next animation frame (once, however many batches come).
  schedule() {
    if (this.frame || this.root.hidden) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      timed('fieldhub-render-overwrite', () => this.render());
    });
  }

  render() {
    if (this.root.hidden) return;
    if (this.reorder) {
      const key = SORT_KEYS[this.sort.key];
      const sign = this.sort.descending ? -1 : 1;
      this.order = [...this.records.values()].sort(
        (a, b) => sign * compare(key(a), key(b)) || a.ch - b.ch || a.id - b.id,
      );
      this.reorder = false;
    }
    this.count.textContent = this.order.length.toLocaleString('en');
    const first = Math.max(0, Math.floor(this.scroller.scrollTop / ROW_PX) - 1);
    const last = Math.min(this.order.length, first + Math.ceil(this.height / ROW_PX) + 2);
    // Rows out of sight are two spacers, so the scroll bar is true.
    this.top.firstChild.style.height = `${first * ROW_PX}px`;
    this.bottom.firstChild.style.height = `${(this.order.length - last) * ROW_PX}px`;
    for (let i = first; i < last; i++) this.fill(this.rowElement(i - first), this.order[i]);
    while (this.body.children.length > last - first + 2) this.bottom.previousSibling.remove();
  }

  /// The n-th row element in sight: made once, then reused by every redraw.
  rowElement(n) {
    if (n + 2 < this.body.children.length) return this.body.children[n + 1];
    const row = el('tr', {}, ...CELLS.map((c) => el('td', { class: `o-${c}` })));
    this.bottom.before(row);
    return row;
  }

  /// Write a record into a row, touching only what changed.
  fill(row, r) {
    const set = (node, text) => {
      if (node.textContent !== text) node.textContent = text;
    };
    const ms = (us) => (us === null || us === undefined ? '' : (us / 1000).toFixed(3));
    const id = idText(r.id, r.flags);
    const channel = this.channelName(r.ch);
    if (row.dataset.id !== id) row.dataset.id = id;
    if (row.dataset.channel !== channel) row.dataset.channel = channel;
    const [ch, idCell, flags, count, period, jitter, delta, len, data, decoded] = row.children;
    set(ch, channel);
    const colour = `4px solid ${channelColour(r.ch)}`;
    if (ch.style.borderLeft !== colour) ch.style.borderLeft = colour;
    set(idCell, id);
    set(flags, flagText(r.flags));
    set(count, String(r.count));
    set(period, ms(r.period));
    set(jitter, ms(r.jitter));
    set(delta, ms(r.delta));
    set(len, String(r.len));
    // Highlighted: the bytes that differ from the identifier's previous
    // frame (the hub sends it along, as one update may cover many frames).
    const bytesKey = `${r.hex}/${r.previous}`;
    if (data.dataset.bytes !== bytesKey) {
      data.dataset.bytes = bytesKey;
      const bytes = [];
      for (let i = 0; i < r.hex.length; i += 2) {
        const byte = r.hex.slice(i, i + 2);
        const changed = r.previous !== null && r.previous !== undefined && r.previous.slice(i, i + 2) !== byte;
        bytes.push(el('span', { class: changed ? 'byte changed' : 'byte' }, byte));
      }
      data.replaceChildren(...bytes);
    }
    set(decoded, r.decoded || '');
  }
}
