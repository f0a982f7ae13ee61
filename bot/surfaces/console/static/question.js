// An MCP server's question in the thread (a `question` item): the server's message under the
// connector's name (it is the server asking, not the bot), one input per field of the requested
// schema, and Send / Decline / Cancel for the run's requesters. The server checks the answer
// against the schema; a refused value comes back by field and the form stays open. It is never
// an approval: it posts to /questions/{id}, which knows no approval.

import {postJSON} from "./api.js";
import {input} from "./edit.js";

function node(tag, cls, text) {
  const n = document.createElement(tag);
  if (cls) n.className = cls;
  if (text !== undefined) n.textContent = text;
  return n;
}

const ENDED = {accepted: "answered", declined: "declined", cancelled: "cancelled"};

export function renderQuestion(item, ctx) {
  const q = item.data;
  const box = node("div", "item question");
  box.dataset.state = q.state;  // open, accepted, declined or cancelled
  box.append(node("div", "who", "Question from " + q.asker + " (an MCP server, not an approval)"),
    node("p", "text", q.message));
  if (q.state !== "open") {
    box.append(node("div", "hint", ENDED[q.state] || q.state));
    if (q.answered_by) box.lastChild.textContent += " by " + q.answered_by;
    return box;
  }
  const form = node("form");
  const general = node("div", "field-error general");
  form.append(general);
  q.fields.forEach((field, i) => {
    const id = "q-" + q.question_id + "-" + i;
    const label = node("label", "", field.name + (field.required ? " (required)" : ""));
    label.htmlFor = id;
    form.append(label);
    if (field.description) form.append(node("div", "hint", field.description));
    const error = node("div", "field-error");
    error.dataset.name = field.name;
    form.append(input(field, id), error);
  });
  const menu = node("menu");
  for (const [action, word] of [["accept", "Send"], ["decline", "Decline"], ["cancel", "Cancel"]]) {
    const b = node("button", "", word);
    b.type = "button";
    b.value = action;
    b.addEventListener("click", () => answer(form, q, action, ctx));
    menu.append(b);
  }
  form.append(menu);
  box.append(form);
  if (!q.requesters.includes(ctx.viewer)) {
    general.textContent = "Only " + q.requesters.join(", ") + " may answer.";
  }
  return box;
}

async function answer(form, q, action, ctx) {
  const values = {};
  if (action === "accept") {
    for (const f of form.querySelectorAll("[name]")) values[f.name] = f.value;
  }
  const r = await postJSON("/questions/" + encodeURIComponent(q.question_id),
    {action, values, user: ctx.viewer});
  for (const e of form.querySelectorAll(".field-error")) e.textContent = "";
  if (r.ok) return;  // the item's new state comes over the event stream
  const errors = (r.data && r.data.errors) || {};
  for (const [name, message] of Object.entries(errors)) {
    const where = form.querySelector('.field-error[data-name="' + CSS.escape(name) + '"]') ||
      form.querySelector(".field-error.general");
    where.textContent = message;
  }
  if (!Object.keys(errors).length) {
    form.querySelector(".field-error.general").textContent =
      (r.data && (r.data.message || r.data.error)) || "not sent";
  }
}
