// The console's HTTP API: every request goes through request(), which adds a public console's
// token. The token comes in the link (#token=...): kept in this browser, taken out of the
// address bar, and sent as "Authorization: Bearer" (never in a URL, where logs would keep it).
// The event stream is read with fetch for the same reason (EventSource cannot send a header);
// it resumes from the last event id it saw (Last-Event-ID), so nothing is missed or repeated.

export const API = "/console/api";
const TOKEN_KEY = "chatops-token";

export function takeToken() {
  if (location.hash.startsWith("#token=")) {
    localStorage.setItem(TOKEN_KEY, decodeURIComponent(location.hash.slice(7)));
    history.replaceState(history.state, "", location.pathname + location.search);
  }
}

function headers(extra) {
  const token = localStorage.getItem(TOKEN_KEY);
  return Object.assign(token ? {"Authorization": "Bearer " + token} : {}, extra || {});
}

export function request(url, options) {
  const opts = options || {};
  return fetch(url, Object.assign({}, opts, {headers: headers(opts.headers)}));
}

async function answer(response) {
  let data = {};
  try { data = await response.json(); } catch (e) { data = {error: response.statusText}; }
  return {ok: response.ok, status: response.status, data};
}

// {ok, status, data}; a network failure is status 0
export async function getJSON(path) {
  try { return await answer(await request(API + path)); }
  catch (e) { return {ok: false, status: 0, data: {error: "the console is unreachable"}}; }
}

export async function postJSON(path, body) {
  try {
    return await answer(await request(API + path, {method: "POST",
      headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)}));
  } catch (e) { return {ok: false, status: 0, data: {error: "the console is unreachable"}}; }
}

// fetched with the token header (a plain link cannot send it), saved, never shown in this page
export async function download(url, name) {
  const r = await request(url);
  if (!r.ok) return r.status;
  const link = document.createElement("a");
  link.href = URL.createObjectURL(await r.blob());
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 10000);
  return 200;
}

// One Server-Sent Events frame ("id:", "event:", "data:" lines; ":" starts a comment).
export function parseFrame(block) {
  let name = "message", data = "", id = null;
  for (const line of block.split(/\r?\n/)) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") name = value;
    else if (field === "data") data += (data ? "\n" : "") + value;
    else if (field === "id") id = value;
  }
  return data ? {name, data, id} : null;
}

// The event stream, reconnecting after a break (0.5 s, doubling to at most 5 s apart) from the
// last id it saw, so the events made meanwhile come first. `onState(open)` is told each change
// between connected and not (app.js shows a "connection lost" banner while it is not).
export const RETRY_FIRST_MS = 500;
export const RETRY_MOST_MS = 5000;

export class EventStream {
  constructor(onEvent, onRefused, onState) {
    this.onEvent = onEvent;
    this.onRefused = onRefused;
    this.onState = onState || (() => {});
    this.lastId = null;
    this.connected = false;
  }

  setConnected(open) {
    if (open === this.connected) return;
    this.connected = open;
    document.body.dataset.stream = open ? "open" : "closed";
    this.onState(open);
  }

  async run(cursor) {
    this.lastId = String(cursor);
    let pause = RETRY_FIRST_MS;
    for (;;) {
      try {
        const r = await request(API + "/events", {headers: {"Last-Event-ID": this.lastId}});
        if (r.status === 401 || r.status === 403) { this.onRefused(r.status); return; }
        if (!r.ok) throw new Error("events " + r.status);
        this.setConnected(true);
        pause = RETRY_FIRST_MS;
        await this.read(r.body.getReader());
      } catch (e) { /* the connection dropped, or the server is not there: retry below */ }
      this.setConnected(false);
      await new Promise(done => setTimeout(done, pause));
      pause = Math.min(pause * 2, RETRY_MOST_MS);
    }
  }

  async read(reader) {
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const {value, done} = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, {stream: true});
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = parseFrame(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        if (!frame) continue;
        if (frame.id !== null) this.lastId = frame.id;
        this.onEvent(frame.name, JSON.parse(frame.data));
      }
    }
  }
}
