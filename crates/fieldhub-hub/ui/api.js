// The control API as the page uses it: every request carries the hub's
// token when the page was opened as /ui?token=…; the token stays in this
// module (never in storage) and is sent as the header the API checks.

const token = new URLSearchParams(location.search).get('token');

/// Call the control API; resolves to the JSON answer, rejects with the
/// API's own error text. A body is sent as JSON, a Blob (a file) as its bytes.
export async function api(method, path, body) {
  const headers = {};
  if (token) headers.authorization = `Bearer ${token}`;
  const bytes = body instanceof Blob;
  if (body !== undefined) headers['content-type'] = bytes ? 'application/octet-stream' : 'application/json';
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined || bytes ? body : JSON.stringify(body),
  });
  const text = await response.text();
  let answer;
  try {
    answer = text ? JSON.parse(text) : null;
  } catch {
    answer = text;
  }
  if (!response.ok) {
    throw new Error((answer && answer.error) || `${method} ${path}: HTTP ${response.status}`);
  }
  return answer;
}

/// The same request's raw text (downloads).
export async function apiText(path) {
  const headers = token ? { authorization: `Bearer ${token}` } : {};
  const response = await fetch(path, { headers });
  if (!response.ok) {
    let message = `GET ${path}: HTTP ${response.status}`;
    try {
      message = (await response.json()).error || message;
    } catch {
      // not JSON: keep the status line
    }
    throw new Error(message);
  }
  return response.text();
}

/// The monitor's WebSocket URL; browsers cannot set its headers, so the
/// token goes in the query, which the API accepts for this endpoint only.
export function monitorUrl(channels) {
  const url = new URL('/api/v1/monitor', location.href);
  url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  if (channels.length) url.searchParams.set('channels', channels.join(','));
  if (token) url.searchParams.set('token', token);
  return url.href;
}

/// Save `text` as a file named `name`.
export function download(name, text) {
  const link = document.createElement('a');
  link.href = URL.createObjectURL(new Blob([text], { type: 'text/plain' }));
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}

/// Show a message (an action's result or error) in the status line.
export function say(text, isError = false) {
  const line = document.getElementById('message');
  line.textContent = text;
  line.className = isError ? 'error' : '';
}

/// Run an action, reporting its error in the status line.
export async function act(what, action) {
  try {
    const result = await action();
    say(`${what}: done`);
    return result;
  } catch (e) {
    say(`${what}: ${e.message}`, true);
    return undefined;
  }
}

/// Element helper: el('td', {class: 'x'}, 'text', child…).
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === 'onclick') node.addEventListener('click', value);
    else if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  node.append(...children.filter((c) => c !== undefined && c !== null));
  return node;
}

// The page's flag bits (control/trace.rs `flags`): CAN's, and LIN's own
// for a LIN frame (its wire flags share CAN's bits and mean other things).
export const FLAGS = {
  EXT: 1, RTR: 2, BRS: 4, ESI: 8, FD: 16, ERR: 32,
  LIN: 64, LIN_NO_RESPONSE: 128, LIN_COLLISION: 256, LIN_CHECKSUM_ERROR: 512,
  LIN_WAKE_UP: 1024, LIN_GO_TO_SLEEP: 2048,
  XL: 4096, XL_SEC: 8192, XL_RRS: 16384, RAW: 32768,
};

/// Most payload bytes the hub sends of a frame (trace.rs MAX_SHOWN_BYTES).
export const MAX_SHOWN_BYTES = 64;

/// An identifier as candump writes it: 3 hex digits, or 8 when extended
/// (and for a raw frame's 32-bit id); a CAN XL frame's VCID before its
/// priority, as can-utils prints it.
export function idText(id, flags) {
  const hex = (n, digits) => n.toString(16).toUpperCase().padStart(digits, '0');
  if (flags & FLAGS.XL) return hex((id >> 16) & 0xFF, 2) + hex(id & 0x7FF, 3);
  return hex(id, flags & (FLAGS.EXT | FLAGS.ERR | FLAGS.RAW) ? 8 : 3);
}

/// The flags as short letters.
export function flagText(flags) {
  const names = [];
  if (flags & FLAGS.LIN) {
    names.push('LIN');
    if (flags & FLAGS.LIN_NO_RESPONSE) names.push('NO RESPONSE');
    if (flags & FLAGS.LIN_COLLISION) names.push('COLLISION');
    if (flags & FLAGS.LIN_CHECKSUM_ERROR) names.push('CHECKSUM ERROR');
    if (flags & FLAGS.LIN_WAKE_UP) names.push('WAKE-UP');
    if (flags & FLAGS.LIN_GO_TO_SLEEP) names.push('GO-TO-SLEEP');
    return names.join(' ');
  }
  if (flags & FLAGS.XL) {
    names.push('XL');
    if (flags & FLAGS.XL_SEC) names.push('SEC');
    if (flags & FLAGS.XL_RRS) names.push('RRS');
    return names.join(' ');
  }
  if (flags & FLAGS.RAW) return 'RAW';
  if (flags & FLAGS.ERR) names.push('ERR');
  if (flags & FLAGS.EXT) names.push('EXT');
  if (flags & FLAGS.RTR) names.push('RTR');
  if (flags & FLAGS.FD) names.push('FD');
  if (flags & FLAGS.BRS) names.push('BRS');
  if (flags & FLAGS.ESI) names.push('ESI');
  return names.join(' ');
}

/// "DEADBEEF" as "DE AD BE EF".
/// The class that marks a trace row of a frame that is not an ordinary
/// one: an error frame, a LIN header nobody answered, a LIN collision, a
/// LIN wake-up pulse or go-to-sleep command.
export function rowMark(flags) {
  if (flags & FLAGS.ERR) return ' error-frame';
  if (flags & FLAGS.LIN_WAKE_UP) return ' lin-wake-up';
  if (flags & FLAGS.LIN_GO_TO_SLEEP) return ' lin-go-to-sleep';
  if (flags & FLAGS.LIN_COLLISION) return ' lin-collision';
  if (flags & FLAGS.LIN_NO_RESPONSE) return ' lin-no-response';
  if (flags & FLAGS.LIN_CHECKSUM_ERROR) return ' lin-checksum-error';
  return '';
}

/// A frame's data as the trace shows it: words for a remote frame and a
/// LIN header alone, what the bus read for a LIN collision; of a longer
/// frame than the hub sends whole (CAN XL, raw), the bytes it sent and the
/// frame's length.
export function dataText(flags, hex, len) {
  if (len > MAX_SHOWN_BYTES) return `${spacedHex(hex)} … (${len} bytes)`;
  if (flags & FLAGS.LIN_NO_RESPONSE) return 'no response';
  if (flags & FLAGS.LIN_WAKE_UP) return 'wake-up pulse';
  if (flags & FLAGS.LIN_GO_TO_SLEEP) return `go-to-sleep: ${spacedHex(hex)}`;
  if (flags & FLAGS.LIN_COLLISION) return `collision, read ${spacedHex(hex)}`;
  if (flags & FLAGS.RTR && !(flags & FLAGS.LIN)) return 'remote';
  return spacedHex(hex);
}

export function spacedHex(hex) {
  return hex.replace(/(..)(?!$)/g, '$1 ');
}

const PALETTE = ['#2a7ae2', '#e2772a', '#2aa84a', '#b42bd2', '#d22b5a', '#1a9aa0', '#8a6d1a', '#5a5ad2'];

/// The colour of a channel (by its id), the same in every view.
export function channelColour(channel) {
  return PALETTE[channel % PALETTE.length];
}

/// Run `work` and report its duration as a User Timing measure named
/// `name`: a PerformanceObserver sees it (the browser tests add up the
/// page's own work with them); it is not kept in the page's timeline.
export function timed(name, work) {
  const start = performance.now();
  try {
    return work();
  } finally {
    performance.measure(name, { start, end: performance.now() });
    performance.clearMeasures(name);
  }
}
