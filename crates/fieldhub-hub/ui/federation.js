// Federated channels (docs/federation.md) in the header: for each channel
// this hub shares with other hubs, which hub owns it (sequences its frames)
// — this one, or the one this hub relays it from — and, on a relay, whether
// that owner is reachable now. Read from the statistics the page polls each
// second (`federation` of a channel in GET /api/v1/stats): while a relay's
// owner is not reachable, `waiting` holds what the channel's clients were
// told, and the page shows it.

import { el } from './api.js';

export class Federation {
  constructor(root) {
    this.root = root;
  }

  /// Show the federated ones of the statistics' channels.
  show(channels) {
    const shared = channels.filter((c) => c.federation);
    this.root.hidden = shared.length === 0;
    this.root.replaceChildren(...shared.map((c) => item(c.name, c.federation)));
  }
}

function item(channel, federation) {
  const { role, owner, epoch, waiting } = federation;
  let state;
  let text;
  if (role === 'owner') {
    state = 'owner';
    text = `${channel}: owned by this hub (${owner})`;
  } else if (waiting) {
    state = 'unreachable';
    text = `${channel}: owner ${owner} unreachable — ${waiting}`;
  } else {
    state = 'reachable';
    text = `${channel}: owner ${owner}, reachable`;
  }
  const title = `federated channel, owner's epoch ${epoch}, last event ${federation.last_seq}`;
  return el('span', { class: `federated ${state}`, 'data-channel': channel, 'data-state': state, title }, text);
}
