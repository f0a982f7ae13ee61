"""The web console's one HTML page: inline CSS and JS, no build step, no CDN.

It talks to `/console/api/...` (`bot/surfaces/console/surface.py`): POST a request, receive status,
approval cards, answers and notices over SSE (`item` events; the run's events in the seed's
protocol, whose `answer` channel streams the answer as it is written; read with fetch, so the
token goes along), and POST approval decisions. A public
console's token arrives in the link's fragment (`#token=...`, never sent to the server in a URL)
and goes in an `Authorization: Bearer` header. Everything from the
server is inserted as text (or through the escaping Markdown renderer), never as raw HTML.
"""

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>chatops console</title>
<style>
  body { font: 15px/1.45 system-ui, sans-serif; margin: 0; background: #f5f6f8; color: #1d1f23; }
  header { background: #1d2b3a; color: #fff; padding: 10px 18px; display: flex; gap: 16px;
           align-items: center; flex-wrap: wrap; }
  header h1 { font-size: 17px; margin: 0; }
  header .meta { font-size: 13px; opacity: .8; }
  header input { width: 130px; }
  #banner { display: none; background: #fff3cd; color: #664d03; border-bottom: 1px solid #e6c96b;
            padding: 10px 18px; font-weight: 600; }
  #skipped { display: none; background: #eef2f7; color: #334; padding: 6px 18px;
             font-size: 13px; white-space: pre-line; }
  #down { display: none; background: #fdf0e6; color: #5a2d00; padding: 6px 18px;
          font-size: 13px; white-space: pre-line; }
  main { max-width: 860px; margin: 0 auto; padding: 16px 18px 140px; }
  .item { background: #fff; border: 1px solid #dde1e6; border-radius: 8px; padding: 10px 14px;
          margin: 10px 0; }
  .you { background: #e8f0fe; border-color: #c6d7fb; }
  .who { font-size: 12px; color: #5f6670; margin-bottom: 4px; }
  .status ul { list-style: none; padding: 0; margin: 4px 0; }
  .status li { padding: 2px 0; }
  .totals { font-size: 12px; color: #5f6670; }
  .approval { border-left: 5px solid #d08700; }
  .approval.risk-high { border-left-color: #c62828; }
  .approval.risk-low { border-left-color: #2e7d32; }
  .approval pre, .answer pre { background: #f0f2f5; padding: 8px; border-radius: 6px;
                               overflow-x: auto; white-space: pre-wrap; }
  .approval dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px;
                 margin: 6px 0; }
  .approval dt { color: #5f6670; }
  .approval dd { margin: 0; }
  .notice { font-style: italic; background: #fafafa; }
  button { font: inherit; padding: 5px 12px; border-radius: 6px; border: 1px solid #9aa3ad;
           background: #fff; cursor: pointer; margin-right: 6px; }
  button.approve { background: #2e7d32; color: #fff; border-color: #2e7d32; }
  button.reject { background: #c62828; color: #fff; border-color: #c62828; }
  form#ask { position: fixed; bottom: 0; left: 0; right: 0; background: #fff;
             border-top: 1px solid #dde1e6; padding: 10px 18px; display: flex; gap: 8px; }
  form#ask textarea { flex: 1; font: inherit; min-height: 48px; padding: 6px; }
  #toast { position: fixed; top: 60px; right: 18px; background: #1d2b3a; color: #fff;
           padding: 8px 12px; border-radius: 6px; display: none; max-width: 360px; }
</style>
</head>
<body>
<header>
  <h1>chatops console</h1>
  <span class="meta" id="meta"></span>
  <label class="meta">you are <input id="user" autocomplete="off"></label>
  <button type="button" id="new">New conversation</button>
</header>
<div id="banner" role="alert"></div>
<div id="skipped"></div>
<div id="down"></div>
<main id="log"><p class="who" id="empty">Type a request below. Risky tool calls wait for your
approval here.</p></main>
<form id="ask">
  <textarea id="text" placeholder="Ask the bot to do something (Ctrl+Enter sends)"></textarea>
  <button type="submit">Send</button>
</form>
<div id="toast"></div>
<script>
"use strict";
const api = "/console/api";
const items = new Map();
const mine = [];
const live = new Map();  // thread -> answer text streaming in (answer events)
// A public console's token comes in the link (#token=...): kept in this browser, taken out of
// the address bar, and sent as "Authorization: Bearer" with every API request.
if (location.hash.startsWith("#token=")) {
  localStorage.setItem("chatops-token", decodeURIComponent(location.hash.slice(7)));
  history.replaceState(null, "", location.pathname + location.search);
}
const token = localStorage.getItem("chatops-token");
function headers(extra) {
  return Object.assign(token ? {"Authorization": "Bearer " + token} : {}, extra || {});
}
let thread = location.hash.slice(1) || null;
let lastSeq = 0;
const userBox = document.getElementById("user");
userBox.value = localStorage.getItem("chatops-user") || "console-user";
userBox.addEventListener("change", () => localStorage.setItem("chatops-user", userBox.value));

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}
function escapeHtml(s) {
  return s.replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;",
    '"': "&quot;", "'": "&#39;"}[c]));
}
function markdown(src) {
  const parts = escapeHtml(src).split(/```[a-z]*\\n?/);
  return parts.map((part, i) => i % 2 ? "<pre>" + part + "</pre>" : part
    .replace(/^#{1,6} (.*)$/gm, "<strong>$1</strong>")
    .replace(/\\*\\*(.+?)\\*\\*/g, "<strong>$1</strong>")
    .replace(/`([^`]+)`/g, "<code>$1</code>")
    .replace(/\\n/g, "<br>")).join("");
}
function toast(text) {
  const t = document.getElementById("toast");
  t.textContent = text; t.style.display = "block";
  clearTimeout(toast.timer); toast.timer = setTimeout(() => { t.style.display = "none"; }, 4000);
}
const icons = {running: "\\u23f3", waiting_approval: "\\u270b", done: "\\u2705",
  failed: "\\u274c", blocked: "\\u26d4", cancelled: "\\u23f9"};

function renderStatus(d) {
  const box = el("div", "item status");
  box.append(el("div", "who", "status: " + d.state.replace("_", " ")));
  if (d.headline) box.append(el("div", "", d.headline));
  const list = el("ul");
  for (const s of d.steps) {
    const secs = s.elapsed_s == null ? "" : " (" + s.elapsed_s.toFixed(1) + "s)";
    list.append(el("li", "", (icons[s.state] || "\\u2022") + " " + s.label + secs +
      (s.detail ? " \\u2014 " + s.detail : "")));
  }
  box.append(list);
  if (d.totals) box.append(el("div", "totals", d.totals));
  return box;
}
function renderApproval(item) {
  const d = item.data;
  const box = el("div", "item approval risk-" + d.risk);
  box.append(el("div", "who", "approval needed \\u2014 " + d.state));
  const dl = el("dl");
  const rows = [["tool", d.tool_name], ["connector", d.connector + " / " + d.action],
    ["risk", d.risk], ["requested by", d.requesters.join(", ")], ["reason", d.reason || "-"],
    ["approvals", d.approvals_so_far + " of " + d.min_approvals +
      (d.approvers.length ? " (approvers: " + d.approvers.join(", ") + ")" : "")]];
  if (d.secret_looking.length) {
    rows.push(["\u26a0 looks like a secret", d.secret_looking.join(", ") + " (shown as sent)"]);
  }
  for (const note of d.notes) rows.push(["policy", note]);
  if (d.decided_by.length) rows.push(["decided by", d.decided_by.join(", ")]);
  if (d.decision_reason) rows.push(["decision reason", d.decision_reason]);
  for (const [k, v] of rows) { dl.append(el("dt", "", k), el("dd", "", v)); }
  box.append(dl, el("pre", "", d.arguments));
  if (d.state === "pending") {
    const buttons = [["Approve", "approve", "approve"], ["Reject", "reject", "reject"]];
    if (d.grant_ttl_s !== null) {
      buttons.push([d.grant_label, "approve_thread", ""]);
      box.append(el("div", "who", d.grant_note));
    }
    for (const [label, decision, cls] of buttons) {
      const b = el("button", cls, label);
      b.dataset.decision = decision;
      b.onclick = () => decide(d.approval_id, decision);
      box.append(b);
    }
  }
  return box;
}
function render() {
  const log = document.getElementById("log");
  log.replaceChildren();
  const shown = [...items.values()].filter(i => i.thread === thread)
    .concat(mine.filter(m => m.thread === thread))
    .sort((a, b) => a.created - b.created);
  if (!shown.length) log.append(el("p", "who", "Type a request below. Risky tool calls wait " +
    "for your approval here."));
  for (const item of shown) {
    if (item.kind === "you") {
      const box = el("div", "item you"); box.append(el("div", "who", item.user), el("div", "",
        item.text)); log.append(box);
    } else if (item.kind === "status") log.append(renderStatus(item.data));
    else if (item.kind === "approval") log.append(renderApproval(item));
    else if (item.kind === "answer") {
      const box = el("div", "item answer"); box.append(el("div", "who", "answer"));
      const body = el("div"); body.innerHTML = markdown(item.data.markdown);
      box.append(body);
      for (const f of item.data.files || []) {
        const link = el("a", "file", "\\ud83d\\udcce " + f.name);
        link.href = f.url; link.onclick = ev => { ev.preventDefault(); download(f); };
        box.append(el("div", "", ""), link);
      }
      log.append(box);
    } else log.append(el("div", "item notice", item.data.text));
  }
  if (live.has(thread)) {
    const box = el("div", "item answer"); box.append(el("div", "who", "answer (writing\u2026)"),
      el("div", "", live.get(thread))); log.append(box);
  }
  window.scrollTo(0, document.body.scrollHeight);
}
async function download(f) {
  // with the token header (a plain link cannot send it); saved, never rendered in this page
  const r = await fetch(f.url, {headers: headers()});
  if (!r.ok) { toast("the document is gone (" + r.status + ")"); return; }
  const a = el("a"); a.href = URL.createObjectURL(await r.blob()); a.download = f.name;
  document.body.append(a); a.click(); a.remove(); URL.revokeObjectURL(a.href);
}
async function post(path, body) {
  const r = await fetch(api + path, {method: "POST",
    headers: headers({"Content-Type": "application/json"}), body: JSON.stringify(body)});
  let data = {};
  try { data = await r.json(); } catch (e) { data = {error: r.statusText}; }
  return [r.ok, data];
}
async function decide(id, decision) {
  let reason = "";
  const body = {decision, user: userBox.value};
  if (decision === "reject") {
    reason = prompt("Why reject? (the agent reads this; may be empty)");
    if (reason === null) return;
  }
  if (decision === "approve_thread") {
    const named = prompt("Who may run it again without asking? (comma list; " +
      "empty: the requesters)");
    if (named === null) return;
    const people = named.split(",").map(p => p.trim()).filter(p => p);
    if (people.length) body.grantees = people;
  }
  body.reason = reason;
  const [, data] = await post("/approvals/" + id, body);
  toast(data.message || data.error || data.status);
}
document.getElementById("ask").addEventListener("submit", async ev => {
  ev.preventDefault();
  const box = document.getElementById("text");
  const text = box.value.trim();
  if (!text) return;
  const [ok, data] = await post("/messages", {text, thread, user: userBox.value});
  if (!ok) { toast(data.error || "request refused"); return; }
  thread = data.thread; location.hash = thread;
  mine.push({kind: "you", thread, text, user: userBox.value, created: lastSeq + 0.5});
  box.value = ""; render();
});
document.getElementById("text").addEventListener("keydown", ev => {
  if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
    document.getElementById("ask").requestSubmit();
  }
});
document.getElementById("new").onclick = () => { thread = null; location.hash = ""; render(); };
function accept(item) {
  items.set(item.id, item); lastSeq = Math.max(lastSeq, item.seq);
  if (item.kind === "answer") live.delete(item.thread);
}
// Run events in the seed's protocol: {type, status} objects on the step, answer, compact,
// phase, inject and done channels. The answer channel streams the text: start, delta, reset
// (the stream broke: its content replaces what was shown), done.
function runEvent(name, d) {
  if (name !== "answer") return false;
  if (d.status === "start") live.set(d.thread, "");
  else if (d.status === "delta") live.set(d.thread, (live.get(d.thread) || "") + d.content);
  else if (d.status === "reset") live.set(d.thread, d.content);
  else return false;
  return d.thread === thread;
}
function refused(r) {
  const b = document.getElementById("banner");
  b.textContent = r.status === 401 ? "This console needs its token: open it with the link " +
    "ending #token=... (CHATOPS_CONSOLE_TOKEN)." : "The console refused this browser (" +
    r.status + ").";
  b.style.display = "block";
}
async function follow() {
  // Server-Sent Events over fetch (EventSource cannot send the token); reconnects when cut
  for (;;) {
    try {
      const r = await fetch(api + "/events", {headers: headers()});
      if (!r.ok) { refused(r); return; }
      const reader = r.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, {stream: true});
        let end;
        while ((end = buffer.indexOf("\\n\\n")) >= 0) {
          const block = buffer.slice(0, end); buffer = buffer.slice(end + 2);
          let name = "", data = "";
          for (const line of block.split("\\n")) {
            if (line.startsWith("event: ")) name = line.slice(7);
            else if (line.startsWith("data: ")) data += line.slice(6);
          }
          if (name === "item") { accept(JSON.parse(data)); render(); }
          else if (name && data && runEvent(name, JSON.parse(data))) render();
        }
      }
    } catch (e) { /* the connection dropped: reconnect below */ }
    await new Promise(done => setTimeout(done, 2000));
  }
}
async function start() {
  const r = await fetch(api + "/state", {headers: headers()});
  if (!r.ok) { refused(r); return; }
  const state = await r.json();
  if (state.banner) {
    const b = document.getElementById("banner"); b.textContent = state.banner;
    b.style.display = "block";
  }
  if (state.skipped_connectors.length) {
    const s = document.getElementById("skipped");
    s.textContent = "Connectors without their secrets (no tools):\\n" +
      state.skipped_connectors.join("\\n");
    s.style.display = "block";
  }
  if (state.connectors_down.length) {
    const d = document.getElementById("down");
    d.textContent = "MCP server unreachable (its tools are missing" +
      " until it comes up):\\n" + state.connectors_down.map(c =>
        c.connector + ": " + c.reason + (c.retrying ? " (retrying)" : "")).join("\\n");
    d.style.display = "block";
  }
  document.getElementById("meta").textContent = "model " + state.model + " \\u00b7 " +
    state.tools.length + " tools \\u00b7 surfaces: " + state.surfaces.join(", ");
  state.items.forEach(accept);
  render();
  follow();
}
start();
</script>
</body>
</html>
"""
