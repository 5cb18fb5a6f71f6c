// Send: a frame in cansend syntax, once or every N milliseconds, through
// POST /api/v1/channels/{channel}/send (the channel's send port).

import { api, say } from './api.js';

export class Send {
  constructor(root) {
    this.form = root.querySelector('#send-form');
    this.counter = root.querySelector('#send-count');
    this.periodic = root.querySelector('#send-periodic');
    this.timer = null;
    this.sent = 0;
    this.form.addEventListener('submit', (e) => {
      e.preventDefault();
      this.once();
    });
    this.periodic.addEventListener('click', () => this.toggle());
  }

  async once() {
    const channel = this.form.channel.value;
    const frame = this.form.frame.value.trim();
    try {
      await api('POST', `/api/v1/channels/${encodeURIComponent(channel)}/send`, { frame });
      this.sent += 1;
      this.counter.textContent = String(this.sent);
      return true;
    } catch (e) {
      say(`send ${frame}: ${e.message}`, true);
      this.stop();
      return false;
    }
  }

  toggle() {
    if (this.timer) return this.stop();
    const period = Math.max(1, Number(this.form.period.value) || 100);
    this.timer = setInterval(() => this.once(), period);
    this.periodic.textContent = 'Stop';
    this.periodic.classList.add('active');
    return undefined;
  }

  stop() {
    clearInterval(this.timer);
    this.timer = null;
    this.periodic.textContent = 'Send periodically';
    this.periodic.classList.remove('active');
  }
}
