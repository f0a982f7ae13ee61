// The sidebar: the conversations (one row per thread, kept and updated in place, so an event
// leaves the rows it does not change alone) and, on a narrow screen, the drawer that holds it.
// A row says its title (two alike get their start time under it), when it last changed, its
// state, whether something happened since this browser last looked (unread), and has Rename
// and Delete; the search box filters the rows by title, in the page.

import {el, stateBadge} from "./render.js";
import {morph, place} from "./morph.js";

// a time as short as it can be: today's as 14:05, another day's as "3 Dec" (full on hover)
export function shortTime(iso) {
  const date = new Date(iso);
  const today = new Date().toDateString() === date.toDateString();
  return today ? date.toLocaleTimeString([], {hour: "2-digit", minute: "2-digit"})
    : date.toLocaleDateString([], {day: "numeric", month: "short"});
}

// the titles shown (root -> [title, note]): the stored ones; titles alike get a note of their
// start time (to the minute, to the second where the minutes are alike too, then a number),
// shown on a line of its own under the title, so a long title cut short never hides it
export function shownTitles(threads) {
  const groups = new Map();
  for (const t of threads) {
    const title = t.title || "(untitled)";
    if (!groups.has(title)) groups.set(title, []);
    groups.get(title).push(t);
  }
  const shown = new Map();
  for (const [title, alike] of groups) {
    if (alike.length === 1) { shown.set(alike[0].root, [title, ""]); continue; }
    const stamp = (t, seconds) => new Date(t.created).toLocaleString([], {day: "numeric",
      month: "short", hour: "2-digit", minute: "2-digit", second: seconds ? "2-digit" : undefined});
    const minutes = alike.map(t => stamp(t, false));
    const exact = minutes.some((m, i) => minutes.indexOf(m) !== i);
    const notes = alike.map(t => "started " + stamp(t, exact));
    notes.forEach((note, i) => {
      const before = notes.slice(0, i).filter(n => n === note).length;
      shown.set(alike[i].root, [title, before ? note + " (" + (before + 1) + ")" : note]);
    });
  }
  return shown;
}

function row(t, open, [name, note], unread, act) {
  const li = el("li", "thread" + (open ? " open" : "") + (unread ? " unread" : ""));
  const title = note ? name + " \u00b7 " + note : name;
  const a = el("a", "title", name);
  a.href = "/c/" + t.root;
  a.dataset.nav = "";
  a.dataset.root = t.root;
  a.title = title;
  if (note) a.append(el("span", "alike", note));
  if (open) a.setAttribute("aria-current", "page");
  if (unread) a.append(el("span", "sr-only", " (unread)"));
  li.append(a);
  const meta = el("div", "thread-meta");
  if (unread) meta.append(el("span", "dot", "new"));
  const changed = el("time", "when", shortTime(t.updated));
  changed.dateTime = t.updated;
  changed.title = "last change " + new Date(t.updated).toLocaleString();
  meta.append(changed);
  if (t.state) meta.append(stateBadge(t.state));
  if (t.pending) {
    const badge = el("span", "badge pending", String(t.pending));
    badge.title = t.pending + " approval(s) waiting";
    meta.append(badge);
  }
  const tools = el("span", "row-tools");
  for (const [label, what] of [["Rename", "rename"], ["Delete", "delete"]]) {
    const b = el("button", "row-" + what, label);
    b.type = "button";
    b.setAttribute("aria-label", label + " \u201c" + title + "\u201d");
    b.onclick = ev => { ev.preventDefault(); act(what, t, title); };
    tools.append(b);
  }
  meta.append(tools);
  li.append(meta);
  return li;
}

export class Sidebar {
  // `act(what, thread, title)`: a row's Rename or Delete; `unread(thread)`: whether it has news
  constructor(list, links, search, act, unread) {
    this.list = list;
    this.links = links;  // view name -> its link (approvals, calls)
    this.rows = new Map();  // root -> {key, node}
    this.act = act;
    this.unread = unread;
    this.filter = "";
    this.last = null;
    search.addEventListener("input", () => {
      this.filter = search.value.trim().toLowerCase();
      if (this.last) this.render(...this.last);
    });
  }

  // `threads` in their order; `view` the one shown (its row or link is marked current)
  render(threads, view) {
    this.last = [threads, view];
    const titles = shownTitles(threads);
    const nodes = [];
    const roots = new Set();
    for (const t of threads) {
      const open = view.name === "thread" && view.root === t.root;
      const title = titles.get(t.root);
      const unread = !open && this.unread(t);
      const key = [t, open, title.join("\n"), unread, shortTime(t.updated)];
      const had = this.rows.get(t.root);
      let node = had && had.node;
      if (!had) node = row(t, open, title, unread, this.act);
      else if (had.key.some((v, i) => v !== key[i])) {
        node = morph(had.node, row(t, open, title, unread, this.act));
      }
      node.hidden = Boolean(this.filter) && !title[0].toLowerCase().includes(this.filter);
      this.rows.set(t.root, {key, node});
      roots.add(t.root);
      nodes.push(node);
    }
    for (const root of [...this.rows.keys()]) if (!roots.has(root)) this.rows.delete(root);
    place(this.list, nodes);
    for (const [name, link] of Object.entries(this.links)) {
      link.classList.toggle("open", view.name === name);
      if (view.name === name) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
  }
}

// What this browser has seen of each conversation (localStorage: the event id of its latest
// change when it was last open). A conversation never seen before starts as read when the page
// first lists it, and as unread when it appears while the page is open.
export class Seen {
  constructor(storage) {
    this.storage = storage;
    try { this.seen = JSON.parse(storage.getItem("chatops-seen") || "{}"); }
    catch (e) { this.seen = {}; }
  }

  baseline(threads) {
    for (const t of threads) if (!(t.root in this.seen)) this.seen[t.root] = t.seq;
    this.save();
  }

  unread(t) { return t.seq > (this.seen[t.root] || 0); }

  read(t) {
    if (!t || this.seen[t.root] >= t.seq) return;
    this.seen[t.root] = t.seq;
    this.save();
  }

  save() {
    const roots = Object.keys(this.seen);  // keep the 500 most recent
    if (roots.length > 500) {
      roots.sort((a, b) => this.seen[a] - this.seen[b]).slice(0, roots.length - 500)
        .forEach(r => delete this.seen[r]);
    }
    this.storage.setItem("chatops-seen", JSON.stringify(this.seen));
  }
}

// Under the breakpoint the sidebar is a drawer: the menu button opens it, choosing anything in
// it, Escape or a tap beside it closes it (and focus goes back to the button).
export class Drawer {
  constructor(button, panel, scrim) {
    this.button = button;
    this.panel = panel;
    this.scrim = scrim;
    button.addEventListener("click", () => this.toggle(!this.isOpen()));
    scrim.addEventListener("click", () => this.toggle(false));
    panel.addEventListener("click", ev => {
      if (ev.target.closest("a, button")) this.toggle(false);
    });
    document.addEventListener("keydown", ev => {
      if (ev.key === "Escape" && this.isOpen()) { this.toggle(false); button.focus(); }
    });
  }

  isOpen() { return document.body.classList.contains("drawer-open"); }

  toggle(open) {
    document.body.classList.toggle("drawer-open", open);
    this.button.setAttribute("aria-expanded", String(open));
    if (open) (this.panel.querySelector("[aria-current]") || this.panel.querySelector("button"))
      .focus();
  }
}
