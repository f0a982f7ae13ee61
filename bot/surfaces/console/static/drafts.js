// What the user typed and has not sent yet, kept in this browser (localStorage) so that a
// reload loses none of it: a draft per conversation (text typed in one never shows, nor is
// sent, in another; "new" is the conversation not started yet), and the messages the server
// has not taken ("not sent"), shown again after a reload with their "Send again".

const DRAFT = "chatops-draft:";
const UNSENT = "chatops-unsent";

export class Drafts {
  constructor(storage) {
    this.storage = storage;
  }

  key(root) { return DRAFT + (root || "new"); }

  get(root) { return this.storage.getItem(this.key(root)) || ""; }

  set(root, text) {
    if (text.trim()) this.write(this.key(root), text);
    else this.storage.removeItem(this.key(root));
  }

  // the page's own messages the server has not confirmed (items with seq 0), oldest first
  unsent() {
    try {
      const list = JSON.parse(this.storage.getItem(UNSENT) || "[]");
      return Array.isArray(list) ? list : [];
    } catch (e) { return []; }
  }

  keep(item) { this.save([...this.unsent().filter(i => i.id !== item.id), item]); }

  forget(id) {
    const list = this.unsent();
    if (list.some(i => i.id === id)) this.save(list.filter(i => i.id !== id));
  }

  save(list) {
    if (list.length) this.write(UNSENT, JSON.stringify(list));
    else this.storage.removeItem(UNSENT);
  }

  write(key, value) {
    try { this.storage.setItem(key, value); }
    catch (e) { /* storage full or refused: the text stays in the page, not across a reload */ }
  }
}
