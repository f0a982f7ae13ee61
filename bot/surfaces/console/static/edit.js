// "Edit, then approve": the call's arguments in a dialog, one input per argument as the server
// built the form from the tool's JSON Schema (text, number, a select for booleans and enums, JSON
// in a text area for anything else). The server checks the edit (schema, policy, who may approve
// it); a refused edit comes back with its problems by argument, shown in the dialog, which stays
// open: nothing was decided.

import {getJSON, postJSON} from "./api.js";

function node(tag, cls, text) {
  const n = document.createElement(tag);
  if (cls) n.className = cls;
  if (text !== undefined) n.textContent = text;
  return n;
}

export function input(field, id) {
  let box;
  if (field.options.length && (field.kind === "choice" || field.kind === "boolean")) {
    box = node("select");
    if (!field.required) box.append(node("option", "", ""));
    for (const o of field.options) {
      const opt = node("option", "", o);
      opt.value = o;
      box.append(opt);
    }
    box.value = field.value;
  } else if (field.multiline) {
    box = node("textarea");
    box.rows = Math.min(10, Math.max(3, field.value.split("\n").length));
    box.value = field.value;
  } else {
    box = node("input");
    box.type = field.kind === "number" || field.kind === "integer" ? "number" : "text";
    if (field.kind === "number") box.step = "any";
    box.value = field.value;
  }
  box.id = id;
  box.name = field.name;
  box.spellcheck = false;
  return box;
}

function showErrors(dialog, errors) {
  for (const e of dialog.querySelectorAll(".field-error")) e.textContent = "";
  for (const [name, message] of Object.entries(errors || {})) {
    const where = dialog.querySelector('.field-error[data-name="' + CSS.escape(name) + '"]') ||
      dialog.querySelector(".field-error.general");
    where.textContent = (where.textContent ? where.textContent + " " : "") + message;
  }
}

// opens the dialog; resolves to the server's answer once the edit was approved (or refused for
// another reason than the edit itself), or null when the approver cancelled
export async function editThenApprove(card, viewer) {
  const r = await getJSON("/approvals/" + encodeURIComponent(card.approval_id) + "/form?user=" +
    encodeURIComponent(viewer));
  if (!r.ok) return r;
  const form = r.data;
  const dialog = node("dialog");
  dialog.id = "edit-dialog";
  dialog.setAttribute("aria-labelledby", "edit-title");
  const body = node("form");
  body.method = "dialog";
  const title = node("h2", "", form.title);
  title.id = "edit-title";
  body.append(title, node("p", "", form.note), node("div", "field-error general"));
  form.fields.forEach((field, i) => {
    const id = "edit-arg-" + i;
    const label = node("label", "", field.name + (field.required ? " (required)" : ""));
    label.htmlFor = id;
    body.append(label);
    if (field.description) body.append(node("div", "hint", field.description));
    body.append(input(field, id), node("div", "field-error"));
    body.lastChild.dataset.name = field.name;
  });
  const menu = node("menu");
  const cancel = node("button", "", "Cancel");
  cancel.type = "submit";
  cancel.value = "cancel";
  cancel.formNoValidate = true;
  const approve = node("button", "approve", "Approve edited");
  approve.type = "button";
  approve.id = "edit-confirm";
  menu.append(cancel, approve);
  body.append(menu);
  dialog.append(body);
  document.body.append(dialog);
  return new Promise(resolve => {
    dialog.addEventListener("close", () => { dialog.remove(); resolve(dialog.result || null); });
    approve.onclick = async () => {
      const values = {};
      form.fields.forEach((field, i) => {
        const v = document.getElementById("edit-arg-" + i).value;
        values[field.name] = v === "" ? null : v;
      });
      approve.disabled = true;
      const answer = await postJSON("/approvals/" + encodeURIComponent(card.approval_id),
        {decision: "approve_edited", user: viewer, values, fingerprint: form.fingerprint});
      approve.disabled = false;
      if (answer.status === 422 && answer.data.errors) {
        showErrors(dialog, answer.data.errors);
        return;
      }
      dialog.result = answer;
      dialog.close();
    };
    dialog.showModal();
  });
}
