// Sorting by a column: a header whose cells carry data-sort="key" sorts by
// that key on a click, and by the same key the other way round on the next.
// The sorted cell shows the direction (aria-sort, and an arrow by CSS).

/// Numbers by value, anything else as text (by code unit: hex and names
/// sort as they read, and fast enough for thousands of rows per redraw).
export function compare(a, b) {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  const [x, y] = [String(a), String(b)];
  return x < y ? -1 : x > y ? 1 : 0;
}

export class SortHeader {
  /// `initial` is {key, descending}, or {key: null} for the natural order;
  /// `changed` runs after each click.
  constructor(header, initial, changed) {
    this.key = initial.key;
    this.descending = initial.descending;
    this.header = header;
    for (const cell of header.querySelectorAll('[data-sort]')) {
      cell.addEventListener('click', () => {
        if (this.key === cell.dataset.sort) this.descending = !this.descending;
        else {
          this.key = cell.dataset.sort;
          this.descending = false;
        }
        this.show();
        changed();
      });
    }
    this.show();
  }

  show() {
    for (const cell of this.header.querySelectorAll('[data-sort]')) {
      const sorted = cell.dataset.sort === this.key;
      if (sorted) cell.setAttribute('aria-sort', this.descending ? 'descending' : 'ascending');
      else cell.removeAttribute('aria-sort');
    }
  }
}
