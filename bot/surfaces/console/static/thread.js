// The conversation shown, kept in step with the store item by item (keyed by item id): an item
// that did not change is not touched, one that changed is patched in place (morph.js), a new
// one is added where the server's order puts it. So a live event, of this conversation or of
// another, keeps a text selection, the focus and the scroll position; and only new items are
// announced to a screen reader (a small live region of their own, never the whole thread).

import {el, renderItem, renderLive, stepSeconds} from "./render.js";
import {morph, place} from "./morph.js";

const EMPTY = "Type a request below. Risky tool calls wait for your approval here.";
const SAID = 3;  // the announcements kept in the live region

function cut(text, n) { return text.length > n ? text.slice(0, n - 1) + "\u2026" : text; }

// what a screen reader hears when an item arrives
export function spoken(item) {
  const d = item.data;
  if (item.kind === "message") return (d.author || "someone") + " wrote: " + cut(d.text, 200);
  if (item.kind === "approval") return "Approval needed: " + d.tool_name;
  if (item.kind === "question") return "Question from " + d.asker + ": " + d.message;
  if (item.kind === "answer") return "Answer: " + cut(d.markdown || "", 300);
  if (item.kind === "status") return "Run: " + (d.headline || d.state);
  return cut(d.text || "", 200);
}

export class ThreadView {
  constructor(log, announcer, context) {
    this.log = log;
    this.announcer = announcer;
    this.context = context;
    this.root = undefined;   // the thread shown (null: a new conversation)
    this.shown = new Map();  // key -> {item, node}
    this.viewer = null;
    this.jump = context.jump;  // "Jump to latest": shown when news came below a scrolled-up view
    if (this.jump) {
      this.jump.onclick = () => {
        window.scrollTo(0, document.body.scrollHeight);
        this.jump.hidden = true;
      };
      window.addEventListener("scroll", () => { if (this.atBottom()) this.jump.hidden = true; },
        {passive: true});
    }
    setInterval(() => this.tick(), 1000);
  }

  atBottom() { return window.innerHeight + window.scrollY >= document.body.scrollHeight - 40; }

  // show thread `root`'s `items` (in order) and `live`, its answer being written (or undefined)
  render(root, items, live) {
    const fresh = root !== this.root;
    if (fresh) {
      this.shown.clear();
      this.root = root;
      if (this.jump) this.jump.hidden = true;
    }
    const redraw = this.viewer !== this.context.viewer;  // cards read differently for another
    this.viewer = this.context.viewer;
    const atBottom = this.atBottom();
    const nodes = [];
    const keep = new Set();
    let changed = fresh;
    const show = (key, value, make) => {
      const had = this.shown.get(key);
      let node = had && had.node;
      if (!had) { node = make(); changed = true; }
      else if (had.item !== value || redraw) { node = morph(had.node, make()); changed = true; }
      this.shown.set(key, {item: value, node});
      keep.add(key);
      nodes.push(node);
      return !had;
    };
    if (!items.length) show("empty", EMPTY, () => el("p", "empty", EMPTY));
    for (const item of items) {
      const added = show(item.id, item, () => renderItem(item, this.context));
      if (added && !fresh) this.announce(spoken(item));
    }
    if (live !== undefined) show("live", live, () => renderLive(live));
    for (const key of [...this.shown.keys()]) if (!keep.has(key)) this.shown.delete(key);
    place(this.log, nodes);
    if (changed && atBottom) window.scrollTo(0, document.body.scrollHeight);
    else if (changed && !fresh && this.jump) this.jump.hidden = false;
  }

  announce(text) {
    if (!text) return;
    this.announcer.append(el("p", "", text));
    while (this.announcer.childElementCount > SAID) this.announcer.firstElementChild.remove();
  }

  // a running or waiting step's seconds count on
  tick() {
    for (const secs of this.log.querySelectorAll(".secs[data-since]")) {
      const text = stepSeconds(Number(secs.dataset.base), secs.dataset.since);
      if (secs.textContent !== text) secs.textContent = text;
    }
  }
}
