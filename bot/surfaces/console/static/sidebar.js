// The sidebar: the conversations (one row per thread, kept and updated in place, so an event
// leaves the rows it does not change alone) and, on a narrow screen, the drawer that holds it.

import {el, stateBadge} from "./render.js";
import {morph, place} from "./morph.js";

function row(t, open) {
  const li = el("li", "thread" + (open ? " open" : ""));
  const a = el("a", "title", t.title || "(untitled)");
  a.href = "/c/" + t.root;
  a.dataset.nav = "";
  a.dataset.root = t.root;
  a.title = t.title || "";
  if (open) a.setAttribute("aria-current", "page");
  li.append(a);
  const meta = el("div", "thread-meta");
  if (t.state) meta.append(stateBadge(t.state));
  if (t.pending) {
    const badge = el("span", "badge pending", String(t.pending));
    badge.title = t.pending + " approval(s) waiting";
    meta.append(badge);
  }
  li.append(meta);
  return li;
}

export class Sidebar {
  constructor(list, links) {
    this.list = list;
    this.links = links;  // view name -> its link (approvals, calls)
    this.rows = new Map();  // root -> {thread, open, node}
  }

  // `threads` in their order; `view` the one shown (its row or link is marked current)
  render(threads, view) {
    const nodes = [];
    const roots = new Set();
    for (const t of threads) {
      const open = view.name === "thread" && view.root === t.root;
      const had = this.rows.get(t.root);
      let node = had && had.node;
      if (!had) node = row(t, open);
      else if (had.thread !== t || had.open !== open) node = morph(had.node, row(t, open));
      this.rows.set(t.root, {thread: t, open, node});
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
