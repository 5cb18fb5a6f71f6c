// The web monitor's entry: tabs, the live trace stream from the hub's
// monitor WebSocket, and a once-a-second poll of the control API for the
// wiring, faults, recordings, bus load, bus time, federated channels'
// owners and rest-bus simulations. Nothing here waits on the stream:
// batches arrive at most 25 times a second and only update the views'
// models; each view redraws at most once per animation frame.

import { act, api, el, monitorUrl, say, timed } from './api.js';
import { Federation } from './federation.js';
import { Load } from './load.js';
import { Overwrite } from './overwrite.js';
import { Plot } from './plot.js';
import { RestBus } from './rbs.js';
import { RecordingOpener } from './recording.js';
import { Send } from './send.js';
import { SignalComposer } from './signals.js';
import { BusTime } from './time.js';
import { Trace } from './trace.js';
import { Wiring } from './wiring.js';

const names = new Map();
const channelName = (id) => names.get(id) ?? String(id);
const channelId = (name) => [...names].find(([, n]) => n === name)?.[0] ?? -1;
/// Port names by hub-wide port id: from the statistics polled each second,
/// and from the batches, which name the ports that sent their frames (the
/// hub remembers ports that left, so one that came and went between two
/// polls is named too).
const ports = new Map();
/// Who put a frame on the bus, by the kind the hub sends with its port id:
/// a client's port, a bridge, the page's send port, another hub of a
/// federation, or (no kind) the bus itself (error frames).
function senderName(id, kind) {
  switch (kind) {
    case 'client': return ports.get(id) ?? `port ${id}`;
    case 'gateway': return 'bridge';
    case 'send': return 'send port';
    case 'remote': return 'remote hub';
    default: return 'bus';
  }
}

const trace = new Trace(document.getElementById('trace'), channelName, senderName);
const overwrite = new Overwrite(document.getElementById('overwrite'), channelName);
const plot = new Plot(document.getElementById('plot'), channelName);
const opener = new RecordingOpener(document.getElementById('plot'), plot, channelId);
const wiring = new Wiring(document.getElementById('wiring'));
const load = new Load(document.getElementById('load'));
const composer = new SignalComposer(document.getElementById('send'), new Send(document.getElementById('send')));
const busTime = new BusTime(document.getElementById('bus-time'));
const federation = new Federation(document.getElementById('federation'));
const restBus = new RestBus(document.getElementById('rbs'));

let socket = null;
let lastTaken = 0;
let lastTakenAt = performance.now();
/// When the last batch came: a quiet bus sends none, and its rate is 0.
let lastBatchAt = 0;

function showTab(name) {
  for (const button of document.querySelectorAll('nav button[data-tab]')) {
    button.classList.toggle('active', button.dataset.tab === name);
  }
  for (const section of document.querySelectorAll('main > section')) {
    section.hidden = section.id !== name;
  }
  if (name === 'load') load.draw();
  if (name === 'overwrite') overwrite.schedule();
  if (name === 'trace') trace.schedule();
  if (name === 'plot') plot.draw();
  if (name === 'wiring') wiring.refresh().catch((e) => say(`the hub does not answer: ${e.message}`, true));
  if (name === 'rbs') restBus.refresh().catch((e) => say(`the hub does not answer: ${e.message}`, true));
}

function connect() {
  const chosen = document.getElementById('monitor-channel').value;
  const status = document.getElementById('status');
  socket = new WebSocket(monitorUrl(chosen ? [chosen] : []));
  const mine = socket;
  mine.onopen = () => {
    status.textContent = 'live';
    status.className = 'live';
  };
  mine.onmessage = (event) => timed('fieldhub-batch', () => {
    const message = JSON.parse(event.data);
    if (message.channels) {
      for (const c of message.channels) names.set(c.id, c.name);
      return;
    }
    for (const [id, name] of Object.entries(message.names ?? {})) ports.set(Number(id), name);
    trace.add(message, message.skipped + message.dropped);
    overwrite.add(message);
    plot.add(message);
    const now = performance.now();
    lastBatchAt = now;
    if (now - lastTakenAt >= 1000) {
      const rate = ((message.taken - lastTaken) * 1000) / (now - lastTakenAt);
      document.getElementById('rate').textContent = Math.round(Math.max(0, rate)).toLocaleString('en');
      lastTaken = message.taken;
      lastTakenAt = now;
    }
  });
  mine.onclose = () => {
    if (socket !== mine) return;
    status.textContent = 'disconnected; retrying';
    status.className = 'down';
    setTimeout(() => socket === mine && connect(), 1000);
  };
}

function reconnect() {
  const old = socket;
  socket = null;
  if (old) old.close();
  lastTaken = 0;
  connect();
}

async function poll() {
  try {
    if (performance.now() - lastBatchAt > 1500) document.getElementById('rate').textContent = '0';
    const stats = await api('GET', '/api/v1/stats');
    document.getElementById('hub-name').textContent = stats.hub;
    load.add(stats);
    federation.show(stats.channels);
    await busTime.refresh();
    const known = ports.size;
    for (const port of stats.ports) ports.set(port.port_id, port.name);
    if (ports.size !== known) trace.schedule();
    if (!document.getElementById('wiring').hidden) await wiring.refresh();
    if (!document.getElementById('rbs').hidden) await restBus.refresh();
  } catch (e) {
    say(`the hub does not answer: ${e.message}`, true);
  }
}

/// Show which channels decode with a DBC file.
async function showDbcs() {
  const files = await api('GET', '/api/v1/dbc');
  document.getElementById('dbc-status').textContent = files.length
    ? `decoding ${files.map((f) => `${f.channel} (${f.messages} messages)`).join(', ')}`
    : 'no DBC loaded';
  opener.setChannels(files.map((f) => f.channel));
  await composer.setChannels(files.map((f) => f.channel));
}

/// Upload the chosen DBC file for the chosen channel; the hub decodes with
/// it from the next batch on.
async function uploadDbc(input) {
  const file = input.files[0];
  if (!file) return;
  const channel = document.getElementById('dbc-channel').value;
  // Vector's tools write Windows-1252; anything that is not UTF-8 is read so.
  const bytes = await file.arrayBuffer();
  let text;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    text = new TextDecoder('windows-1252').decode(bytes);
  }
  await act(`load ${file.name} for ${channel}`, () =>
    api('PUT', `/api/v1/channels/${encodeURIComponent(channel)}/dbc`, { text }));
  input.value = '';
  await showDbcs().catch(() => {});
}

async function start() {
  for (const button of document.querySelectorAll('nav button[data-tab]')) {
    button.addEventListener('click', () => showTab(button.dataset.tab));
  }
  const channels = (await act('load channels', () => api('GET', '/api/v1/channels'))) || [];
  const monitorChoice = document.getElementById('monitor-channel');
  monitorChoice.append(...channels.map((c) => el('option', { value: c.name }, c.name)));
  monitorChoice.addEventListener('change', reconnect);
  for (const select of document.querySelectorAll('select.channel-choice')) {
    select.replaceChildren(...channels.map((c) => el('option', { value: c.name }, c.name)));
  }
  document.getElementById('dbc-file').addEventListener('change', (e) => uploadDbc(e.target));
  const access = await act('read what this page may do', () => api('GET', '/api/v1/access'));
  if (access) {
    busTime.allow(access);
    restBus.allow(access);
    opener.allow(access);
  }
  await showDbcs().catch(() => {});
  showTab('trace');
  connect();
  await poll();
  setInterval(poll, 1000);
  document.body.dataset.ready = 'true';
  say('ready');
}

start();
