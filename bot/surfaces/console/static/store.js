// What the page knows, without the DOM: items by id (each at its latest event), the sidebar's
// threads, and the answers streaming in. The server orders everything: an item's place in its
// thread is its `position`, and a state is newer when its `seq` (event id) is higher, so an
// item that arrives twice (a thread loaded while the stream replays) is taken once.

export const FINAL = ["done", "failed", "cancelled"];
export const HIDDEN_THREADS = ["approvals"];  // the approvals view's cards: not a conversation

export class Store {
  constructor() {
    this.items = new Map();    // id -> item
    this.threads = new Map();  // root -> summary
    this.live = new Map();     // root -> answer text streaming in
  }

  // an item from the server (or the page's own message before the server has it, seq 0)
  accept(item) {
    const had = this.items.get(item.id);
    if (had && had.seq >= item.seq && item.seq !== 0) return false;
    if (had && item.seq === 0 && had.seq > 0) return false;
    this.items.set(item.id, item);
    if (item.summary) this.summarise(item.summary);
    if (item.kind === "answer" || (item.kind === "status" && FINAL.includes(item.state))) {
      this.live.delete(item.thread);
    }
    return true;
  }

  summarise(thread) {
    const had = this.threads.get(thread.root);
    if (!had || had.seq <= thread.seq) this.threads.set(thread.root, thread);
  }

  // a run event in the seed's protocol; only the answer channel changes what is shown:
  // start, delta (appended), reset (replaces: the stream broke, or a reconnect's text so far)
  // (the server sends the text so far rendered and sanitised as `html`: that is what shows)
  runEvent(name, d) {
    if (name !== "answer") return false;
    if (d.status === "start") this.live.set(d.thread, d.html || "");
    else if (d.status === "reset") this.live.set(d.thread, d.html || "");
    else if (d.status === "delta") {
      if (!this.live.has(d.thread)) return false;  // its answer is already here
      if (this.live.get(d.thread) === d.html) return false;  // nothing new to show yet
      this.live.set(d.thread, d.html || "");
    } else return false;
    return true;
  }

  // one thread's items in the server's order (the page's own unsent messages last)
  thread(root) {
    return [...this.items.values()].filter(i => i.thread === root)
      .sort((a, b) => a.position - b.position || a.seq - b.seq);
  }

  // conversations, the one changed last first
  sidebar() {
    return [...this.threads.values()]
      .filter(t => !HIDDEN_THREADS.includes(t.root) && !t.hidden)
      .sort((a, b) => b.seq - a.seq);
  }

  clear() {
    this.items.clear();
    this.threads.clear();
    this.live.clear();
  }
}
