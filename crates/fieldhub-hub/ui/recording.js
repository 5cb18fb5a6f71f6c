// Opening a recording in the plot view: the file's bytes go to the hub
// (POST /api/v1/recordings/decode), which reads candump logs, Vector ASC
// and BLF and ASAM MDF4 with the readers `fieldhub convert` uses and
// answers the frames — with their signals' values when a channel's DBC is
// chosen — in the form the live stream has; the page parses no format.
// A file the hub cannot read is reported with the reader's error (the line
// or byte offset), a file over the hub's cap with the cap. Opening one is a
// change (a POST): for an access that may not control the hub the file
// choice is disabled and says why.

import { api, el, say } from './api.js';

export class RecordingOpener {
  /// `channelId(name)`: the hub's number of a channel, as the stream uses.
  constructor(root, plot, channelId) {
    this.plot = plot;
    this.channelId = channelId;
    this.dbc = root.querySelector('#plot-dbc');
    this.file = root.querySelector('#plot-file');
    this.file.addEventListener('change', (e) => this.open(e.target));
    this.hint = root.querySelector('#plot-no-control');
  }

  /// Disable opening files when the page's access may not control the hub.
  allow(access) {
    const reason = access.control ? '' : `${access.access} may not control the hub: opening a recording `
      + 'sends it to the hub (POST /api/v1/recordings/decode), which needs the hub\'s token or an [[access]] '
      + 'with control = true';
    this.file.disabled = !access.control;
    this.file.title = reason;
    this.hint.textContent = reason;
    this.hint.hidden = access.control;
  }

  /// The channels with a DBC file, offered to decode a recording with.
  setChannels(channels) {
    const chosen = this.dbc.value;
    this.dbc.replaceChildren(el('option', { value: '' }, 'no DBC (raw bits only)'),
      ...channels.map((c) => el('option', { value: c }, c)));
    if (channels.includes(chosen)) this.dbc.value = chosen;
  }

  async open(input) {
    const file = input.files[0];
    if (!file) return;
    input.value = '';
    const dbc = this.dbc.value;
    const query = dbc ? `?dbc=${encodeURIComponent(dbc)}` : '';
    say(`plot: reading ${file.name}…`);
    let answer;
    try {
      answer = await api('POST', `/api/v1/recordings/decode${query}`, file);
    } catch (e) {
      say(`plot: ${file.name}: ${e.message}`, true);
      return;
    }
    // Decoded frames count as the DBC's channel's, so series picked from
    // live frames plot the recording too.
    const ch = dbc ? this.channelId(dbc) : -1;
    this.plot.showRecording(answer.frames.map(([, us, id, flags, hex, values]) =>
      ({ ch, us, id, flags, hex, values })));
    const count = answer.frames.length.toLocaleString('en');
    const kept = answer.truncated ? ` (the first ${count}: the hub reads no more of one file)` : '';
    say(`plot: ${file.name} (${answer.format}): ${count} frames${kept}${dbc ? `, decoded with ${dbc}'s DBC` : ''}; ` +
      'Resume for live frames', answer.frames.length === 0);
  }
}
