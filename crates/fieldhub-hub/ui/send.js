// Send: a frame in cansend syntax, once or every N milliseconds, through
// POST /api/v1/channels/{channel}/send (the channel's send port). Each
// periodic send is a job listed under the form with its frame, period and
// count, stopped by its own button (or by the hub refusing a frame: the
// reason is shown). Several jobs run at once; the signal composer
// (signals.js) lists its periodic sends here too.

import { api, el, say } from './api.js';

export class Send {
  constructor(root) {
    this.form = root.querySelector('#send-form');
    this.counter = root.querySelector('#send-count');
    this.jobs = root.querySelector('#send-jobs');
    this.sent = 0;
    this.form.addEventListener('submit', (e) => {
      e.preventDefault();
      this.once(this.form.channel.value, this.form.frame.value.trim());
    });
    root.querySelector('#send-periodic').addEventListener('click', () => this.start());
  }

  /// Send one frame; false (and the reason shown) when the hub refused it.
  async once(channel, frame) {
    try {
      await api('POST', `/api/v1/channels/${encodeURIComponent(channel)}/send`, { frame });
      this.sent += 1;
      this.counter.textContent = String(this.sent);
      return true;
    } catch (e) {
      say(`send ${frame}: ${e.message}`, true);
      return false;
    }
  }

  /// A new periodic job of the form's frame, channel and period.
  start() {
    const channel = this.form.channel.value;
    const frame = this.form.frame.value.trim();
    const period = Math.max(1, Number(this.form.period.value) || 100);
    this.job(frame, channel, period, () => this.once(channel, frame));
  }

  /// A periodic job listed as `what`: `fire` every `period` ms until its
  /// Stop button, or until `fire` answers false (the hub refused).
  job(what, channel, period, fire) {
    const count = el('span', { class: 'job-count' }, '0');
    const stop = el('button', { type: 'button', 'data-action': 'stop' }, 'Stop');
    const item = el('li', { 'data-frame': what, 'data-channel': channel },
      `${what} on ${channel} every ${period} ms, sent `, count, ' ', stop);
    let sent = 0;
    const timer = setInterval(async () => {
      if (await fire()) {
        sent += 1;
        count.textContent = String(sent);
      } else {
        end();
      }
    }, period);
    const end = () => {
      clearInterval(timer);
      item.remove();
    };
    stop.addEventListener('click', end);
    this.jobs.append(item);
  }
}
