// Bring a node already in the page to the state of a freshly rendered one, touching only what
// differs: a text node whose text is the same is left alone, so a selection in it survives, and
// an element that stays is the same element, so focus on it survives too. Replacing the node
// (what the page did on every event) loses both.

const HANDLERS = ["onclick"];  // the event-handler properties render.js sets

function syncAttributes(old, fresh) {
  for (const {name} of [...old.attributes]) {
    if (!fresh.hasAttribute(name)) old.removeAttribute(name);
  }
  for (const {name, value} of fresh.attributes) {
    if (old.getAttribute(name) !== value) old.setAttribute(name, value);
  }
  for (const prop of HANDLERS) if (old[prop] !== fresh[prop]) old[prop] = fresh[prop];
}

export function morph(old, fresh) {
  if (old.nodeType !== fresh.nodeType || old.nodeName !== fresh.nodeName) {
    old.replaceWith(fresh);
    return fresh;
  }
  if (old.nodeType !== Node.ELEMENT_NODE) {
    if (old.data !== fresh.data) old.data = fresh.data;
    return old;
  }
  syncAttributes(old, fresh);
  const kept = [...old.childNodes];
  const wanted = [...fresh.childNodes];
  wanted.forEach((child, i) => {
    if (i < kept.length) morph(kept[i], child);
    else old.append(child);
  });
  for (const extra of kept.slice(wanted.length)) extra.remove();
  return old;
}

// Make `nodes` the children of `container`, in that order, moving only what is out of place:
// an unchanged list moves nothing (a moved node loses its focus and its selection).
export function place(container, nodes) {
  const wanted = new Set(nodes);
  for (const child of [...container.childNodes]) if (!wanted.has(child)) child.remove();
  let cursor = container.firstChild;
  for (const node of nodes) {
    if (node === cursor) cursor = cursor.nextSibling;
    else container.insertBefore(node, cursor);
  }
}
