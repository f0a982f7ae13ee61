// The console page: a sidebar of conversations, one conversation (or the approvals or call-log
// view) at an address of its own (History API: Back and reload follow it), the composer, and
// one event stream that keeps all of it live. Each thread is loaded from the server, in the
// server's order; the stream resumes from the event id the first load was as of.

import {EventStream, download, getJSON, postJSON, request, takeToken} from "./api.js";
import {Drafts} from "./drafts.js";
import {editThenApprove} from "./edit.js";
import {el} from "./render.js";
import {Drawer, Seen, Sidebar} from "./sidebar.js";
import {Store} from "./store.js";
import {ThreadView} from "./thread.js";
import {pendingForMe, showApprovals, showCalls} from "./views.js";

const store = new Store();
const drafts = new Drafts(localStorage);
const $ = id => document.getElementById(id);
const userBox = $("user");
const box = $("text");
const loaded = new Set();   // threads whose history has been fetched
let view = {name: "thread", root: null};
let badgeTimer = null;

function newId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return [...bytes].map(b => b.toString(16).padStart(2, "0")).join("");
}

function toast(text) {
  const t = $("toast");
  t.textContent = text;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 5000);
}

function viewer() { return userBox.value.trim() || "console-user"; }

// --- addresses ------------------------------------------------------------------------------
function parseLocation() {
  const path = location.pathname;
  if (path.startsWith("/c/")) return {name: "thread", root: decodeURIComponent(path.slice(3))};
  if (path === "/approvals") return {name: "approvals"};
  if (path === "/calls") return {name: "calls", params: new URLSearchParams(location.search)};
  return {name: "thread", root: null};
}

function navigate(url, replace) {
  if (replace) history.replaceState(null, "", url);
  else if (url !== location.pathname + location.search) history.pushState(null, "", url);
  show();
}

document.addEventListener("click", ev => {
  const link = ev.target.closest("a[data-nav]");
  if (!link || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) return;
  ev.preventDefault();
  navigate(link.getAttribute("href"));
});
window.addEventListener("popstate", () => show());

// --- rendering ------------------------------------------------------------------------------
const seen = new Seen(localStorage);
const sidebar = new Sidebar($("threads"), {approvals: $("nav-approvals"), calls: $("nav-calls")},
  $("thread-search"), (what, t, title) => manage(what, t, title), t => seen.unread(t));
new Drawer($("menu"), $("sidebar"), $("scrim"));

// the open conversation is read; the tab says which one it is
function renderSidebar() {
  const open = view.name === "thread" && view.root ? store.threads.get(view.root) : null;
  if (open) seen.read(open);
  sidebar.render(store.sidebar(), view);
  if (view.name === "thread") {
    document.title = open && open.title ? open.title + " \u00b7 chatops" : "chatops console";
  }
}

const context = {
  get viewer() { return viewer(); },
  actions: {status: [stopButton], answer: [feedbackButtons]},  // a card's `.actions` (render.js)
  decide: (card, decision) => decide(card, decision),
  retry: item => sendMessage(item.data.text, item.id.slice(2), item.thread || null),
  download: f => download(f.url, f.name).then(status => {
    if (status !== 200) toast("the document is gone (" + status + ")");
  }),
  expanded: new Set(),  // the steps and cards opened (render.js keeps them open)
  ratings: new Map(),   // run id -> "up" | "down": this viewer's thumbs (pressed), as stored
  jump: $("jump"),      // "Jump to latest" (thread.js)
  copy: (text, button) => navigator.clipboard.writeText(text).then(() => {
    button.textContent = "Copied";
    setTimeout(() => { button.textContent = "Copy"; }, 1500);
  }, () => toast("The browser did not allow copying: select the text instead.")),
};
const thread = new ThreadView($("log"), $("announce"), context);

function renderThread() {
  const root = view.root || "";
  thread.render(view.root || null, store.thread(root),
    view.root && store.live.has(view.root) ? store.live.get(view.root) : undefined);
}

function render() {
  renderSidebar();
  if (view.name === "thread") renderThread();
}

// --- the composer: a draft per conversation, growing with its text --------------------------
let draftRoot;  // the conversation whose draft the composer holds

function grow() {
  box.style.height = "auto";
  const most = Math.max(96, Math.round(window.innerHeight * 0.4));
  box.style.height = Math.min(box.scrollHeight + 2, most) + "px";
}

function openDraft(root) {
  if (root === draftRoot) return;
  draftRoot = root;
  box.value = drafts.get(root);
  grow();
}

box.addEventListener("input", () => { drafts.set(draftRoot, box.value); grow(); });
// the composer's height, for what sits above it on a phone (the toast)
new ResizeObserver(() => document.body.style.setProperty("--composer",
  $("ask").offsetHeight + "px")).observe($("ask"));

async function show() {
  view = parseLocation();
  $("conversation").hidden = view.name !== "thread";
  $("approvals-view").hidden = view.name !== "approvals";
  $("calls-view").hidden = view.name !== "calls";
  document.body.dataset.view = view.name;
  if (view.name !== "thread") {
    document.title = (view.name === "approvals" ? "Approvals" : "Call log") + " \u00b7 chatops";
  }
  renderSidebar();
  if (view.name === "approvals") {
    setBadge(await showApprovals($("approvals-view"), viewer(), decide));
  } else if (view.name === "calls") {
    await showCalls($("calls-view"), view.params, params =>
      navigate("/calls" + (String(params) ? "?" + params : "")));
  } else {
    openDraft(view.root || null);
    renderThread();
    if (view.root && !loaded.has(view.root)) await loadThread(view.root);
    if (!matchMedia("(max-width: 760px)").matches) box.focus();  // a phone: no keyboard pop-up
  }
  document.body.dataset.ready = view.name + ":" + (view.root || "");
}

async function loadThread(root) {
  const r = await getJSON("/threads/" + encodeURIComponent(root) + "?user=" +
    encodeURIComponent(viewer()));
  if (r.status === 404) { toast("No such conversation."); navigate("/", true); return; }
  if (!r.ok) { toast(r.data.error || "could not load the conversation"); return; }
  loaded.add(root);
  for (const [run, rating] of Object.entries(r.data.ratings || {})) context.ratings.set(run, rating);
  store.summarise(r.data.thread);
  r.data.items.forEach(take);
  for (const item of r.data.items) {  // thumbs as this viewer left them: drawn again
    const now = store.items.get(item.id);
    if (item.data.feedback_run && now) store.items.set(item.id, Object.assign({}, now));
  }
  render();
}

function setBadge(count) {
  const badge = $("approvals-badge");
  badge.textContent = String(count);
  badge.hidden = !count;
}

function refreshApprovals() {
  clearTimeout(badgeTimer);
  badgeTimer = setTimeout(async () => {
    if (view.name === "approvals") setBadge(await showApprovals($("approvals-view"), viewer(),
      decide));
    else setBadge(await pendingForMe(viewer()));
  }, 250);
}

// --- actions --------------------------------------------------------------------------------
// Stop and feedback name the run; the server decides who may stop it (requesters, approvers)
function stopButton(item) {
  const d = item.data;
  if (!d.run_id || !["running", "waiting_approval"].includes(d.state)) return null;
  const b = el("button", "stop", "Stop");
  b.title = "Stop this run (its pending approvals are cancelled)";
  b.onclick = () => control(d.run_id, "stop", {});
  return b;
}

function feedbackButtons(item) {
  const run = item.data.feedback_run;
  if (!run) return null;
  const box = el("span", "feedback");
  const chosen = context.ratings.get(run);
  for (const [label, rating] of [["Helpful", "up"], ["Not helpful", "down"]]) {
    const b = el("button", "rate-" + rating + (chosen === rating ? " pressed" : ""), label);
    b.type = "button";
    b.setAttribute("aria-label", "thumbs " + rating + ": " + label.toLowerCase());
    b.setAttribute("aria-pressed", String(chosen === rating));
    b.onclick = () => rate(item, run, rating);
    box.append(b);
  }
  return box;
}

// a thumb stays pressed (and comes back pressed after a reload: the thread says the viewer's)
async function rate(item, run, rating) {
  const r = await control(run, "feedback", {rating});
  if (!r.ok) return;
  context.ratings.set(run, rating);
  const now = store.items.get(item.id);
  if (now) store.items.set(item.id, Object.assign({}, now));  // re-rendered: its thumbs changed
  renderThread();
}

async function control(runId, what, body) {
  const r = await postJSON("/runs/" + encodeURIComponent(runId) + "/" + what,
    Object.assign({user: viewer()}, body));
  toast(what === "feedback" && r.ok ? "Thanks for the feedback." :
    r.data.message || r.data.error || r.data.status);
  return r;
}

function ask(dialog, text) {
  return new Promise(resolve => {
    dialog.querySelector("p").textContent = text;
    dialog.returnValue = "";
    dialog.addEventListener("close", () => resolve(dialog.returnValue), {once: true});
    dialog.showModal();
  });
}

// a row's Rename and Delete (server routes; every open page is told by a `thread` event)
async function manage(what, t, title) {
  if (what === "rename") {
    $("rename-text").value = t.title;
    if (await ask($("rename-dialog"), title) !== "rename") return;
    const r = await postJSON("/threads/" + t.root + "/rename", {title: $("rename-text").value});
    if (!r.ok) { toast(r.data.error || "not renamed"); return; }
    threadChanged(r.data.thread);
  } else {
    if (await ask($("delete-dialog"), title) !== "delete") return;
    const r = await postJSON("/threads/" + t.root + "/delete", {});
    if (!r.ok) { toast(r.data.error || "not deleted"); return; }
    threadChanged(r.data.thread);
    toast("Deleted from the console; its call-log rows are kept.");
  }
}

function threadChanged(t) {
  store.summarise(t);
  if (t.hidden && view.name === "thread" && view.root === t.root) {
    toast("This conversation was deleted from the console.");
    navigate("/", true);
  } else renderSidebar();
}

async function decide(card, decision) {
  const body = {decision, user: viewer(), reason: ""};
  const what = card.tool_name + " (" + card.connector + " / " + card.action + ")";
  if (decision === "approve_comment") {  // an approval, with the comment kept beside it
    $("approve-comment").value = "";
    if (await ask($("approve-dialog"), what) !== "approve") return;
    body.decision = "approve";
    body.reason = $("approve-comment").value.trim();
  }
  if (decision === "reject" || decision === "reject_all") {
    $("reject-reason").value = "";
    if (await ask($("reject-dialog"), what) !== "reject") return;
    body.reason = $("reject-reason").value.trim();
  }
  if (decision === "approve_edited") {
    const r = await editThenApprove(card, viewer());
    if (r) toast(r.data.message || r.data.error || r.data.status);
    refreshApprovals();
    return;
  }
  if (decision === "request_changes") {
    $("changes-text").value = "";
    if (await ask($("changes-dialog"), what) !== "send") return;
    body.reason = $("changes-text").value.trim();
  }
  if (decision === "approve_thread") {
    $("grant-people").value = "";
    if (await ask($("grant-dialog"), card.grant_note) !== "grant") return;
    const people = $("grant-people").value.split(",").map(p => p.trim()).filter(p => p);
    if (people.length) body.grantees = people;
  }
  const r = await postJSON("/approvals/" + card.approval_id, body);
  toast(r.data.message || r.data.error || r.data.status);
  refreshApprovals();
}

// a message the page sent is kept in this browser until the server has it (drafts.js)
function take(item) {
  if (item.kind === "message" && item.seq > 0) drafts.forget(item.id);
  return store.accept(item);
}

async function sendMessage(text, clientId, root) {
  const local = {id: "m-" + clientId, thread: root || "", kind: "message", state: "", seq: 0,
    position: Number.MAX_SAFE_INTEGER, at: new Date().toISOString(),
    data: {text, author: viewer(), outcome: "sending"}};
  store.accept(local);
  drafts.keep(local);
  render();
  const r = await postJSON("/messages", {text, thread: root, user: viewer(),
    client_id: clientId});
  const mine = store.items.get(local.id);
  if (!r.ok) {
    if (mine && mine.seq === 0) {
      const failed = Object.assign({}, mine, {data: Object.assign({}, mine.data,
        {outcome: "failed"})});
      store.accept(failed);
      drafts.keep(failed);
    }
    toast(r.data.error || "not sent");
    render();
    return false;
  }
  drafts.forget(local.id);
  if (mine && mine.seq === 0) mine.thread = r.data.thread;
  if (!root && view.name === "thread" && !view.root) {
    // the new conversation now has its address; what was typed meanwhile is its draft
    drafts.set(r.data.thread, drafts.get(null));
    drafts.set(null, "");
    navigate("/c/" + r.data.thread, true);
  } else render();
  return true;
}

$("ask").addEventListener("submit", async ev => {
  ev.preventDefault();
  const text = box.value.trim();
  if (!text) return;
  box.value = "";
  drafts.set(draftRoot, "");
  grow();
  await sendMessage(text, newId(), view.root);
});

// Enter sends; Shift+Enter starts a new line (as in Slack); an IME composing text keeps Enter
box.addEventListener("keydown", ev => {
  if (ev.key !== "Enter" || ev.shiftKey || ev.isComposing || ev.keyCode === 229) return;
  ev.preventDefault();
  $("ask").requestSubmit();
});

$("new").onclick = () => navigate("/");
$("signout").onclick = signOut;

// --- the event stream -----------------------------------------------------------------------
function onEvent(name, d) {
  if (name === "item") {
    if (take(d)) {
      render();
      if (d.kind === "approval" || d.kind === "approval_batch") refreshApprovals();
    }
  } else if (name === "thread") {
    threadChanged(d);
  } else if (name === "resync") {
    store.clear();
    loaded.clear();
    start();
  } else if (store.runEvent(name, d) && view.name === "thread" && view.root === d.thread) {
    renderThread();
  }
}

function refused(status) {
  const b = $("banner");
  b.textContent = status === 401 ? "This console needs its token: open it with the link " +
    "ending #token=... (CHATOPS_CONSOLE_TOKEN)." : "The console refused this browser (" +
    status + ").";
  b.hidden = false;
}

// a lost stream shows at once; back, the events made meanwhile come first (Last-Event-ID) and
// the sidebar is asked again (titles and states of conversations the stream may not name)
let everConnected = false;
async function streamState(open) {
  $("offline").hidden = open || !everConnected;
  document.body.classList.toggle("offline", !open && everConnected);
  if (!open) return;
  if (everConnected) {
    const threads = await getJSON("/threads");
    if (threads.ok) { threads.data.threads.forEach(t => store.summarise(t)); renderSidebar(); }
  }
  everConnected = true;
}

const stream = new EventStream(onEvent, refused, streamState);

// A public console knows who you are (signed in, or named by its auth proxy): the "you are"
// box shows that name and cannot be changed; a local console lets you name yourself.
function showIdentity(identity) {
  if (!identity || !identity.verified) return;
  userBox.value = identity.user || "";
  userBox.readOnly = true;
  userBox.title = identity.mode === "oidc" ? "signed in" : "named by the sign-in proxy";
  if (identity.mode === "oidc") $("signout").hidden = false;
}

async function signOut() {
  await request("/console/signout", {method: "POST",
    headers: {"Content-Type": "application/json"}, body: "{}"});
  location.reload();
}

function showState(state) {
  if (state.banner) { $("banner").textContent = state.banner; $("banner").hidden = false; }
  if (state.skipped_connectors.length) {
    $("skipped").textContent = "Connectors without their secrets (no tools):\n" +
      state.skipped_connectors.join("\n");
    $("skipped").hidden = false;
  }
  if (state.connectors_down.length) {
    $("down").textContent = "MCP server unreachable (its tools are missing until it comes " +
      "up):\n" + state.connectors_down.map(c => c.connector + ": " + c.reason +
        (c.retrying ? " (retrying)" : "")).join("\n");
    $("down").hidden = false;
  }
  const model = state.llm_configured ? "model " + state.model : "no model configured";
  $("meta").textContent = model + " \u00b7 " + state.tools.length +
    " tools \u00b7 surfaces: " + state.surfaces.join(", ");
}

async function start() {
  const threads = await getJSON("/threads");
  if (!threads.ok) { refused(threads.status); return null; }
  threads.data.threads.forEach(t => store.summarise(t));
  seen.baseline(threads.data.threads);
  await show();
  refreshApprovals();
  return threads.data.cursor;
}

async function boot() {
  takeToken();
  if (/^#[0-9a-f]{32}$/.test(location.hash)) history.replaceState(null, "",
    "/c/" + location.hash.slice(1));  // an older link to a conversation
  userBox.value = localStorage.getItem("chatops-user") || "console-user";
  userBox.addEventListener("change", () => {
    localStorage.setItem("chatops-user", userBox.value);
    context.ratings.clear();  // another person's thumbs: read again with each thread
    loaded.clear();
    if (view.name === "thread" && view.root) loadThread(view.root);
    render();
    refreshApprovals();
  });
  for (const item of drafts.unsent()) {  // not sent before the reload: "Send again"
    store.accept(Object.assign({}, item, {data: Object.assign({}, item.data,
      {outcome: "failed"})}));
  }
  const state = await getJSON("/state");
  if (!state.ok && state.status === 401 && state.data.signin) {
    location.assign(state.data.signin);  // a public console: sign in, then back here
    return;
  }
  if (!state.ok) { refused(state.status); return; }
  showIdentity(state.data.identity);
  showState(state.data);
  const cursor = await start();
  if (cursor !== null) stream.run(cursor);
}

boot();
