// The two views beside the conversations: approvals (waiting for you, waiting for others,
// the latest decisions) and the call log (filters in the address, so Back and a shared link
// keep them; CSV and JSON downloads of the same filters).

import {API, download, getJSON} from "./api.js";
import {el, renderApproval, stateBadge} from "./render.js";

function section(title, items, empty, card) {
  const part = el("section", "group");
  part.append(el("h3", "", title + " (" + items.length + ")"));
  if (!items.length) part.append(el("p", "empty", empty));
  for (const item of items) part.append(card(item));
  return part;
}

// one of mine: its age and expiry ("asked 5 min ago · expires in 55 min") under its header
function waitingCard(item, box) {
  if (item.waiting) box.children[0].after(el("p", "waiting-age", item.waiting));
  return box;
}

// returns how many approvals wait for the viewer (the sidebar's badge)
export async function showApprovals(container, viewer, decide) {
  const r = await getJSON("/approvals?user=" + encodeURIComponent(viewer));
  container.replaceChildren(el("h2", "", "Approvals"));
  if (!r.ok) { container.append(el("p", "error", r.data.error || "not available")); return 0; }
  const d = r.data;
  container.append(
    section("Waiting for you", d.mine, "Nothing waits for you.",
      item => waitingCard(item, renderApproval(item, {viewer, decide, linkThreads: true}))),
    section("Waiting for others", d.others, "Nothing else is waiting.",
      item => renderApproval(item, {viewer, refusal: item.refusal, linkThreads: true})),
    section("Recent decisions", d.recent, "No decisions yet.",
      item => renderApproval(item, {viewer, linkThreads: true})));
  return d.mine.length;
}

export async function pendingForMe(viewer) {
  const r = await getJSON("/approvals?user=" + encodeURIComponent(viewer));
  return r.ok ? r.data.mine.length : 0;
}

const FILTERS = [["since", "since", "7d"], ["until", "until", "now"],
  ["connector", "connector", "any"], ["action", "action", "any"], ["user", "user", "anyone"],
  ["workspace", "workspace", "any"]];
const OUTCOMES = ["", "ok", "error", "blocked", "rejected", "expired", "unknown"];

function filterForm(params, onFilter) {
  const form = el("form", "filters");
  form.id = "call-filters";
  for (const [name, label, hint] of FILTERS) {
    const field = el("label", "", label + " ");
    const input = el("input");
    input.name = name;
    input.placeholder = hint;
    input.value = params.get(name) || "";
    field.append(input);
    form.append(field);
  }
  const outcome = el("label", "", "outcome ");
  const select = el("select");
  select.name = "outcome";
  for (const value of OUTCOMES) {
    const option = el("option", "", value || "any");
    option.value = value;
    option.selected = (params.get("outcome") || "") === value;
    select.append(option);
  }
  outcome.append(select);
  const apply = el("button", "", "Show");
  apply.type = "submit";
  form.append(outcome, apply);
  form.onsubmit = ev => {
    ev.preventDefault();
    const chosen = new URLSearchParams();
    for (const [key, value] of new FormData(form)) if (String(value).trim()) {
      chosen.set(key, String(value).trim());
    }
    onFilter(chosen);
  };
  return form;
}

function args(value) {
  const text = JSON.stringify(value);
  return text.length > 160 ? text.slice(0, 159) + "\u2026" : text;
}

function callRow(c) {
  const tr = el("tr");
  const decided = [...c.approved_by.map(u => "approved by " + u),
    ...c.rejected_by.map(u => "rejected by " + u)].join("; ");
  const outcome = el("td");
  const state = c.result_status === "ok" ? "done" : c.result_status === "started" ? "running"
    : c.result_status === "error" ? "failed" : c.result_status;
  const badge = stateBadge(state);
  badge.querySelector(".word").textContent = c.result_status === "started" ? "unknown"
    : c.result_status;
  outcome.append(badge);
  if (c.error) outcome.append(el("div", "detail", c.error));
  const at = el("td", "", new Date(c.at).toLocaleString());
  if (c.thread) {  // a console call: its row opens the conversation it was made in
    const link = el("a", "call-thread", at.textContent);
    link.href = "/c/" + c.thread;
    link.dataset.nav = "";
    link.title = "open the conversation";
    at.replaceChildren(link);
  }
  const who = el("td", "", c.requester);
  // where it was made: the platform and, with several workspaces, the team or tenant
  who.append(el("div", "detail", c.platform + (c.workspace ? " " + c.workspace : "")));
  tr.append(at, who,
    el("td", "", c.connector + "." + c.action), el("td", "args", args(c.arguments)),
    el("td", "", c.approval_status + (decided ? " (" + decided + ")" : "")), outcome,
    el("td", "num", Math.round(c.duration_ms) + " ms"));
  if (c.approval_comment) tr.children[4].append(el("div", "detail comment", c.approval_comment));
  return tr;
}

export async function showCalls(container, params, onFilter) {
  container.replaceChildren(el("h2", "", "Call log"), filterForm(params, onFilter));
  const downloads = el("div", "downloads");
  for (const fmt of ["csv", "json"]) {
    const b = el("button", "download", "Download " + fmt.toUpperCase());
    b.type = "button";
    b.dataset.format = fmt;
    b.onclick = async () => {
      const query = new URLSearchParams(params);
      query.set("format", fmt);
      await download(API + "/calls?" + query, "chatops-calls." + fmt);
    };
    downloads.append(b);
  }
  container.append(downloads);
  const table = el("table", "calls");
  const headRow = el("tr");
  for (const h of ["when", "requester", "call", "arguments", "approval", "outcome", "took"]) {
    headRow.append(el("th", "", h));
  }
  table.append(el("thead"), el("tbody"));
  table.firstChild.append(headRow);
  const summary = el("p", "summary", "loading\u2026");
  const scroller = el("div", "table-box");  // a wide table scrolls in its box, not the page
  scroller.append(table);
  container.append(summary, scroller);
  await page(table.lastChild, summary, container, params, null);
}

async function page(body, summary, container, params, before) {
  const query = new URLSearchParams(params);
  if (before) query.set("before", before);
  const r = await getJSON("/calls?" + query);
  if (!r.ok) { summary.textContent = r.data.error || "not available"; summary.className = "error";
    return; }
  for (const c of r.data.calls) body.append(callRow(c));
  summary.textContent = "Calls " + r.data.query + " (newest first): " + body.childElementCount +
    (r.data.more ? " shown" : "");
  if (r.data.more && r.data.calls.length) {
    const more = el("button", "more", "Older calls");
    more.type = "button";
    more.onclick = () => { more.remove();
      page(body, summary, container, params, r.data.calls[r.data.calls.length - 1].id); };
    container.append(more);
  }
}
