// Items as DOM nodes, from the server's view models (StatusView, ApprovalCardView: the ones
// Slack and Feishu render). Everything from the server goes in as text (el() sets textContent),
// except an answer's HTML, which the server rendered from Markdown and sanitised. States are an
// icon and a word, never an emoji alone. The status and answer cards end in an `.actions` row
// (hidden while empty): buttons such as a running status's Stop or an answer's feedback go
// there, made by the functions in `ctx.actions.status` / `ctx.actions.answer` (item -> node).

import {renderQuestion} from "./question.js";

function addActions(box, makers, item) {
  const row = el("div", "actions");
  for (const make of makers || []) {
    const node = make(item);  // null: nothing to add to this item
    if (node) row.append(node);
  }
  box.append(row);
}

export function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

const SVG = "http://www.w3.org/2000/svg";
const ICONS = {running: "running", waiting_approval: "waiting", pending: "waiting",
  done: "done", approved: "done", failed: "failed", rejected: "failed", blocked: "blocked",
  changes_requested: "blocked",
  cancelled: "cancelled", expired: "blocked"};
export const WORDS = {running: "running", waiting_approval: "waiting for approval",
  pending: "waiting for approval", done: "done", approved: "approved", failed: "failed",
  rejected: "rejected", blocked: "blocked", cancelled: "cancelled", expired: "expired",
  changes_requested: "changes requested"};

export function icon(name) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "icon");
  svg.setAttribute("aria-hidden", "true");
  const use = document.createElementNS(SVG, "use");
  use.setAttribute("href", "#i-" + name);
  svg.append(use);
  return svg;
}

// a state as an icon plus its word
export function stateBadge(state) {
  const badge = el("span", "state state-" + state);
  badge.append(icon(ICONS[state] || "notice"), el("span", "word", WORDS[state] || state));
  return badge;
}

export function when(iso) {
  const node = el("time", "when");
  if (!iso) return node;
  const date = new Date(iso);
  node.dateTime = iso;
  node.textContent = date.toLocaleTimeString([], {hour: "2-digit", minute: "2-digit"});
  node.title = date.toLocaleString();
  return node;
}

function head(label, item, extra) {
  const row = el("div", "who");
  row.append(el("span", "label", label));
  if (extra) row.append(extra);
  row.append(when(item.at));
  return row;
}

const OUTCOMES = {sending: "sending\u2026", started: "started a run",
  interrupt: "the agent reads this before its next step", busy: "not started: the bot is busy",
  limited: "not started: you have as many requests in progress as one person may",
  failed: "not sent", duplicate: "already sent"};

function renderMessage(item, ctx) {
  const d = item.data;
  const box = el("div", "item you");
  box.append(head(d.author, item), el("div", "text", d.text));
  const ack = el("div", "ack ack-" + d.outcome, OUTCOMES[d.outcome] || d.outcome);
  if (d.outcome === "failed" && item.seq === 0) {
    const retry = el("button", "retry", "Send again");
    retry.type = "button";
    retry.onclick = () => ctx.retry(item);
    ack.append(" ", retry);
  }
  box.append(ack);
  return box;
}

// a <details> that stays open across the re-renders of its item (`ctx.expanded`: keys open;
// noted on the click itself, before anything can re-render it)
function opener(cls, key, ctx, summary) {
  const box = el("details", cls);
  box.dataset.key = key;
  box.open = Boolean(ctx.expanded && ctx.expanded.has(key));
  summary.onclick = ev => {
    if (!ctx.expanded) return;
    if (ev.currentTarget.parentNode.open) ctx.expanded.delete(key);
    else ctx.expanded.add(key);
  };
  box.append(summary);
  return box;
}

// a step's seconds; a step still running (or waiting for a human) counts on in the page
// (app.js ticks every `.secs[data-since]`): its time as of the item's last change, plus since
export function stepSeconds(base, since) {
  const extra = since ? Math.max(0, Date.now() - Date.parse(since)) / 1000 : 0;
  return (base + extra).toFixed(1) + "s";
}

function stepLine(s, updated) {
  const line = el("span", "step-line");
  line.append(stateBadge(s.state), el("span", "tool", s.label));
  if (s.elapsed_s != null) {
    const live = ["running", "waiting_approval"].includes(s.state);
    const secs = el("span", "secs", stepSeconds(s.elapsed_s, live ? updated : ""));
    if (live) { secs.dataset.base = String(s.elapsed_s); secs.dataset.since = updated; }
    line.append(secs);
  }
  if (s.detail) line.append(el("span", "detail", "\u2014 " + s.detail));
  return line;
}

// a step opens to show its arguments and its output (or error), as the status reporter keeps
// them: known secrets masked, cut to a few hundred characters; open steps stay open
function renderStep(s, item, ctx) {
  const li = el("li", "step");
  li.dataset.state = s.state;
  if (!s.arguments && !s.output) { li.append(stepLine(s, item.updated)); return li; }
  const key = item.id + "/" + (s.key || s.label);
  const summary = el("summary");
  summary.append(stepLine(s, item.updated));
  const box = opener("step-open", key, ctx, summary);
  const dl = el("dl", "step-io");
  dl.append(el("dt", "", "arguments"), el("dd", "", s.arguments || "(none)"));
  if (s.output || s.state === "failed") {
    const failed = s.state === "failed" || s.state === "blocked";
    dl.append(el("dt", "", failed ? "error" : "output"),
      el("dd", failed ? "error-text" : "", s.output || "(none)"));
  }
  box.append(dl);
  li.append(box);
  return li;
}

function renderStatus(item, ctx) {
  const d = item.data;
  const box = el("div", "item status");
  box.dataset.state = d.state;
  const title = el("div", "who");
  const same = (d.headline || "").toLowerCase() === (WORDS[d.state] || d.state);
  title.append(stateBadge(d.state), el("span", "headline", same ? "" : d.headline || ""),
    when(item.updated));
  box.append(title);
  const list = el("ul", "steps");
  for (const s of d.steps) list.append(renderStep(s, item, ctx));
  box.append(list);
  if (d.totals) box.append(el("div", "totals", d.totals));
  addActions(box, ctx.actions && ctx.actions.status, item);
  return box;
}

// A decided card's one line: outcome, tool, by whom, when, and the decider's comment.
function foldedLine(d) {
  const line = el("div", "folded");
  line.append(el("strong", "outcome", WORDS[d.state] || d.state), " ",
    el("code", "tool", d.tool_name));
  if (d.decided_by.length) line.append(" by " + d.decided_by.join(", "));
  if (d.decided_at) line.append(" \u00b7 " + new Date(d.decided_at).toLocaleString());
  if (d.decision_reason && d.decided_by.length) {
    const said = d.state === "changes_requested" ? "guidance: " : "";
    line.append(" \u00b7 " + said, el("q", "comment", d.decision_reason));
  }
  return line;
}

export function renderApproval(item, ctx) {
  const d = item.data;
  const box = el("div", "item approval risk-" + d.risk);
  box.dataset.state = d.state;
  box.dataset.approval = d.approval_id;
  box.append(head("approval needed", item, stateBadge(d.state)));
  if (d.state === "pending" && ctx.viewer && d.requesters.includes(ctx.viewer)) {
    box.append(el("div", "requester-note", "You asked for this: you are one of the " +
      "requesters of this call (where four-eyes applies, someone else must decide it)."));
  }
  const dl = el("dl");
  const rows = [["tool", d.tool_name], ["connector", d.connector + " / " + d.action],
    ["risk", d.risk], ["requested by", d.requesters.join(", ")], ["reason", d.reason || "-"],
    ["approvals", d.approvals_so_far + " of " + d.min_approvals +
      (d.approvers.length ? " (approvers: " + d.approvers.join(", ") + ")" : "")]];
  if (d.secret_looking.length) {
    rows.push(["looks like a secret", d.secret_looking.join(", ") + " (shown as sent)"]);
  }
  for (const note of d.notes) rows.push(["policy", note]);
  if (d.expires_at && d.state === "pending") rows.push(["expires", new Date(d.expires_at)
    .toLocaleString()]);
  for (const [k, v] of rows) dl.append(el("dt", "", k), el("dd", "", v));
  const args = el("pre", "arguments", d.arguments);
  if (d.state === "pending") {
    box.append(dl, args);
  } else {  // decided: folded to one line, the rest behind "show" (kept open across patches)
    box.classList.add("decided");
    box.append(foldedLine(d));
    const more = opener("full approval-details", item.id + "/card", ctx,
      el("summary", "", "show"));
    more.append(dl, args);
    box.append(more);
  }
  const link = d.thread_link || (ctx.linkThreads ? "/c/" + item.thread : "");
  if (link) {
    const a = el("a", "thread-link", "open the conversation");
    a.href = link;
    a.dataset.nav = "";
    box.append(a);
  }
  const actions = el("div", "actions");
  if (d.state === "pending" && ctx.decide && !ctx.refusal) {
    const buttons = [["Approve", "approve", "approve"], ["Edit, then approve", "approve_edited",
      "edit"], ["Request changes", "request_changes", "changes"], ["Reject", "reject", "reject"],
      ["Approve with comment", "approve_comment", "approve comment"]];
    if (d.grant_ttl_s !== null) {
      buttons.push([d.grant_label, "approve_thread", "grant"]);
      box.append(el("div", "grant-note", d.grant_note));
    }
    for (const [label, decision, cls] of buttons) {
      const b = el("button", cls, label);
      b.type = "button";
      b.dataset.decision = decision;
      b.onclick = () => ctx.decide(d, decision);
      actions.append(b);
    }
  }
  if (ctx.refusal) actions.append(el("span", "refusal", ctx.refusal));
  box.append(actions);
  return box;
}

// A batch card: the calls of one model response that need approval, each as its own card
// (its state, its buttons), then Approve all / Reject all; the server decides every pending
// call or, when the clicker may not answer one of them that way, nothing.
export function renderBatch(item, ctx) {
  const d = item.data;
  const waiting = d.items.filter(c => c.state === "pending").length;
  const box = el("div", "item approval-batch");
  box.dataset.state = item.state;
  box.dataset.batch = d.batch_id;
  const label = waiting ? "approval needed: " + d.items.length + " calls"
    : "approvals: " + d.items.length + " calls";
  box.append(head(label, item, stateBadge(waiting ? "pending" : "done")));
  if (waiting) {
    box.append(el("div", "batch-note", waiting + " of " + d.items.length + " waiting. Decide " +
      "each one, or all at once (each call keeps its own approvers and quorum)."));
  } else box.classList.add("decided");
  d.items.forEach((call, i) => {
    const card = renderApproval({...item, id: item.id + "." + i, data: call}, ctx);
    card.classList.add("batch-call");
    box.append(card);
  });
  const actions = el("div", "actions batch-actions");
  if (waiting >= 2 && ctx.decide && !ctx.refusal) {
    const all = {approval_id: d.lead, tool_name: d.items.length + " calls", connector: "batch",
      action: "all"};
    const buttons = [["Reject all", "reject_all", "reject-all"]];
    if (d.approve_all_offered) buttons.unshift(["Approve all", "approve_all", "approve-all"]);
    for (const [text, decision, cls] of buttons) {
      const b = el("button", cls, text);
      b.type = "button";
      b.dataset.decision = decision;
      b.onclick = () => ctx.decide(all, decision);
      actions.append(b);
    }
  }
  box.append(actions);
  return box;
}

// the one place the page takes HTML: an answer (whole, or as written so far), which the server
// rendered from Markdown and sanitised (bot/surfaces/console/markdown.py: render, live_html)
function serverHtml(html) {
  const body = el("div", "markdown");
  body.innerHTML = html;
  return body;
}

function renderAnswer(item, ctx) {
  const d = item.data;
  const box = el("div", "item answer");
  box.append(head("answer", item));
  const body = serverHtml(d.html);
  addCopyButtons(body, ctx);
  box.append(body);
  for (const f of d.files || []) {
    const link = el("a", "file", f.name + " (" + f.size + " bytes)");
    link.href = f.url;
    link.onclick = ev => { ev.preventDefault(); ctx.download(f); };
    box.append(el("div", "file-row"));
    box.lastChild.append(icon("notice"), link);
  }
  addActions(box, ctx.actions && ctx.actions.answer, item);
  return box;
}

// a notice naming people (`mention`: "<name> stopped this run.") says their names first
function renderNotice(item) {
  const box = el("div", "item notice");
  const names = (item.data.mention || []).filter(n => n).join(", ");
  box.append(icon("notice"), el("span", "text", (names ? names + " " : "") + item.data.text),
    when(item.at));
  if (item.data.link) {
    const a = el("a", "", "open");
    a.href = item.data.link;
    a.dataset.nav = "";
    box.append(" ", a);
  }
  return box;
}

export function renderItem(item, ctx) {
  let node;
  if (item.kind === "message") node = renderMessage(item, ctx);
  else if (item.kind === "status") node = renderStatus(item, ctx);
  else if (item.kind === "approval") node = renderApproval(item, ctx);
  else if (item.kind === "approval_batch") node = renderBatch(item, ctx);
  else if (item.kind === "answer") node = renderAnswer(item, ctx);
  else if (item.kind === "question") node = renderQuestion(item, ctx);
  else node = renderNotice(item);
  node.dataset.id = item.id;
  node.dataset.kind = item.kind;
  return node;
}

// the answer being written: the server's rendering of it so far (sanitised like an answer);
// patched in place as it grows (morph.js), so what is shown stays and new blocks are added
export function renderLive(html) {
  const box = el("div", "item live");  // not ".answer": that is the answer as posted
  box.dataset.kind = "live";
  const who = el("div", "who");
  who.append(stateBadge("running"), el("span", "label", "answer (writing\u2026)"));
  box.append(who, serverHtml(html));
  return box;
}

// a code block gets a Copy button (its text, to the clipboard)
function addCopyButtons(body, ctx) {
  for (const pre of body.querySelectorAll("pre")) {
    const code = pre.querySelector("code");
    const lang = code && [...code.classList].find(c => c.startsWith("language-"));
    const bar = el("div", "code-bar");
    if (lang) bar.append(el("span", "lang", lang.slice(9)));
    const copy = el("button", "copy", "Copy");
    copy.type = "button";
    copy.setAttribute("aria-label", "Copy the code" + (lang ? " (" + lang.slice(9) + ")" : ""));
    copy.onclick = () => ctx.copy && ctx.copy((code || pre).textContent, copy);
    bar.append(copy);
    pre.before(bar);
  }
}
