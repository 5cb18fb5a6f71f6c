// Send by signals: pick a message of a channel's DBC file, fill in its
// signals' physical values, and the hub encodes the frame and sends it
// from the channel's send port (POST /api/v1/channels/{channel}/send-signals)
// — once, or every N ms as a job in the send box's list. The fields start
// at the signals' start values; a multiplexed signal's field is enabled
// only while the multiplexor's value carries it, and only enabled fields
// are sent. Channels without a DBC file are not offered.

import { api, el, idText, say } from './api.js';

export class SignalComposer {
  constructor(root, send) {
    this.send = send;
    this.form = root.querySelector('#signal-form');
    this.choice = root.querySelector('#signal-message');
    this.fields = root.querySelector('#signal-fields');
    this.messages = [];
    this.form.channel.addEventListener('change', () => this.load());
    this.choice.addEventListener('change', () => this.showFields());
    this.form.addEventListener('submit', (e) => {
      e.preventDefault();
      const job = this.job();
      if (job) this.fire(job);
    });
    root.querySelector('#signal-periodic').addEventListener('click', () => this.periodic());
  }

  /// Offer these channels (those with a DBC file); reloads the messages.
  async setChannels(channels) {
    const select = this.form.channel;
    const chosen = select.value;
    select.replaceChildren(...channels.map((c) => el('option', { value: c }, c)));
    if (channels.includes(chosen)) select.value = chosen;
    this.form.hidden = channels.length === 0;
    await this.load();
  }

  /// The chosen channel's messages.
  async load() {
    const channel = this.form.channel.value;
    this.messages = channel ? (await api('GET', `/api/v1/channels/${encodeURIComponent(channel)}/dbc`)) : [];
    const chosen = this.choice.value;
    this.choice.replaceChildren(...this.messages.map((m) =>
      el('option', { value: m.name }, `${m.name} (${idText(m.id, m.extended ? 1 : 0)})`)));
    if (this.messages.some((m) => m.name === chosen)) this.choice.value = chosen;
    this.showFields();
  }

  showFields() {
    const message = this.messages.find((m) => m.name === this.choice.value);
    this.fields.replaceChildren(...(message?.signals ?? []).map((s) => {
      const input = el('input', { 'data-signal': s.name, size: 8, value: String(s.start),
        title: `${s.min} to ${s.max}` });
      if (s.multiplexor) input.addEventListener('input', () => this.selectMultiplexed());
      input.selector = s.selector;
      return el('label', {}, `${s.name} `, input, s.unit ? ` ${s.unit}` : '');
    }));
    this.selectMultiplexed();
  }

  /// Enable the multiplexed signals the multiplexor's value carries.
  selectMultiplexed() {
    const switchInput = [...this.fields.querySelectorAll('input')].find((i) =>
      this.signal(i.dataset.signal)?.multiplexor);
    const value = switchInput ? Number(switchInput.value) : null;
    for (const input of this.fields.querySelectorAll('input')) {
      if (input.selector !== null && input.selector !== undefined) input.disabled = input.selector !== value;
    }
  }

  signal(name) {
    return this.messages.find((m) => m.name === this.choice.value)?.signals.find((s) => s.name === name);
  }

  /// The form's frame as a request: channel, message and the enabled
  /// signals' values; null (and the reason shown) when a value is no number.
  job() {
    const signals = {};
    for (const input of this.fields.querySelectorAll('input:not(:disabled)')) {
      const value = Number(input.value);
      if (input.value.trim() === '' || !Number.isFinite(value)) {
        say(`${input.dataset.signal}: '${input.value}' is not a number`, true);
        return null;
      }
      signals[input.dataset.signal] = value;
    }
    return { channel: this.form.channel.value, message: this.choice.value, signals };
  }

  /// Send one frame of `job`; false (and the reason shown) when refused.
  async fire(job) {
    try {
      const sent = await api('POST', `/api/v1/channels/${encodeURIComponent(job.channel)}/send-signals`,
        { message: job.message, signals: job.signals });
      say(`${job.message} sent as ${sent.frame}`);
      return true;
    } catch (e) {
      say(`send ${job.message}: ${e.message}`, true);
      return false;
    }
  }

  periodic() {
    const job = this.job();
    if (!job) return;
    const period = Math.max(1, Number(this.form.period.value) || 100);
    const values = Object.entries(job.signals).map(([name, value]) => `${name}=${value}`).join(' ');
    this.send.job(`${job.message} ${values}`, job.channel, period, () => this.fire(job));
  }
}
