// The overwrite view (like python -m can.viewer): one row per identifier
// with its count, mean period, time since the previous frame and last data;
// bytes that differ from the identifier's previous frame are highlighted. The hub
// counts every frame the monitor took, drawn in the trace or not, and sends
// changed rows four times a second; they are drawn only while the view is
// shown.

import { el, flagText, idText } from './api.js';

export class Overwrite {
  constructor(root, channelName) {
    this.root = root;
    this.channelName = channelName;
    this.rows = new Map();
    /// Rows the hub sent that are not drawn yet (the view is hidden).
    this.pending = new Map();
    this.body = root.querySelector('#overwrite-rows');
    root.querySelector('#overwrite-clear').addEventListener('click', () => {
      this.rows.clear();
      this.pending.clear();
      this.body.replaceChildren();
    });
  }

  /// Take a batch's changed rows: [channel, id, flags, count, period_us,
  /// delta_us, last_us, data_hex, len, decoded, previous_data_hex]. They are drawn at once when
  /// the view is shown, else when it is shown next.
  add(batch) {
    for (const r of batch.rows) this.pending.set(`${r[0]}:${r[1]}:${r[2] & 35}`, r);
    if (!this.root.hidden) this.render();
  }

  render() {
    let added = false;
    for (const [key, r] of this.pending) {
      let row = this.rows.get(key);
      if (!row) {
        row = this.create(r);
        this.rows.set(key, row);
        added = true;
      }
      this.update(row, r);
    }
    this.pending.clear();
    if (added) {
      const sorted = [...this.rows.values()].sort((a, b) => a.ch - b.ch || a.id - b.id);
      this.body.replaceChildren(...sorted.map((row) => row.tr));
    }
  }

  create(r) {
    const cells = {};
    for (const name of ['ch', 'id', 'flags', 'count', 'period', 'delta', 'len', 'data', 'decoded']) {
      cells[name] = el('td', { class: `o-${name}` });
    }
    cells.ch.textContent = this.channelName(r[0]);
    cells.id.textContent = idText(r[1], r[2]);
    const tr = el('tr', { 'data-id': idText(r[1], r[2]), 'data-channel': this.channelName(r[0]) }, ...Object.values(cells));
    return { ch: r[0], id: r[1], tr, cells };
  }

  update(row, r) {
    const ms = (us) => (us === null || us === undefined ? '' : (us / 1000).toFixed(3));
    row.cells.flags.textContent = flagText(r[2]);
    row.cells.count.textContent = String(r[3]);
    row.cells.period.textContent = ms(r[4]);
    row.cells.delta.textContent = ms(r[5]);
    row.cells.len.textContent = String(r[8]);
    row.cells.decoded.textContent = r[9] || '';
    // Highlighted: the bytes that differ from the identifier's previous
    // frame (the hub sends it along, as one update may cover many frames).
    const hex = r[7];
    const previous = r[10];
    const bytes = [];
    for (let i = 0; i < hex.length; i += 2) {
      const byte = hex.slice(i, i + 2);
      const changed = previous !== null && previous !== undefined && previous.slice(i, i + 2) !== byte;
      bytes.push(el('span', { class: changed ? 'byte changed' : 'byte' }, byte));
    }
    row.cells.data.replaceChildren(...bytes);
  }
}
