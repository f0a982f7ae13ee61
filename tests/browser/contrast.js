// WCAG colour contrast, measured in the page (the test evaluates this function): every visible
// element that shows text (its own text nodes, or a form control's value) against the colour
// behind it, the backgrounds of its ancestors composited (and an ancestor's opacity applied to
// the text). Returns the pairs under `least`. No network, no library: the formula is WCAG 2's.
(([scope, least]) => {
  const parse = value => {
    const m = value.match(/rgba?\(([^)]+)\)/);
    if (!m) return null;
    const [r, g, b, a] = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
    return {r, g, b, a: a === undefined ? 1 : a};
  };
  const over = (top, under) => {  // `top` (with its alpha) painted on an opaque `under`
    const mix = k => top[k] * top.a + under[k] * (1 - top.a);
    return {r: mix("r"), g: mix("g"), b: mix("b"), a: 1};
  };
  const luminance = c => {
    const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
  };
  const ratio = (a, b) => {
    const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
  };
  const behind = node => {  // the opaque colour under `node`'s text
    const layers = [];
    for (let n = node; n && n.nodeType === 1; n = n.parentElement) {
      const bg = parse(getComputedStyle(n).backgroundColor);
      if (bg && bg.a > 0) layers.push(bg);
      if (bg && bg.a === 1) break;
    }
    let colour = {r: 255, g: 255, b: 255, a: 1};  // the canvas
    for (const layer of layers.reverse()) colour = over(layer, colour);
    return colour;
  };
  const opacity = node => {
    let o = 1;
    for (let n = node; n && n.nodeType === 1; n = n.parentElement) {
      o *= Number(getComputedStyle(n).opacity);
    }
    return o;
  };
  const shows = el => {
    if (el.matches(":disabled, option, .sr-only, .sr-only *")) return false;
    if (!el.checkVisibility({visibilityProperty: true, opacityProperty: true})) return false;
    if (el.matches("input, textarea, select")) return Boolean(el.value);
    return [...el.childNodes].some(n => n.nodeType === 3 && n.data.trim());
  };
  const found = [];
  for (const el of document.querySelector(scope).querySelectorAll("*")) {
    if (!shows(el)) continue;
    const fg = parse(getComputedStyle(el).color);
    const bg = behind(el);
    const text = over(Object.assign({}, fg, {a: fg.a * opacity(el)}), bg);
    const r = ratio(text, bg);
    if (r < least) {
      found.push({text: (el.value || el.textContent).trim().slice(0, 60), ratio: +r.toFixed(2),
        color: getComputedStyle(el).color, on: `rgb(${bg.r}, ${bg.g}, ${bg.b})`,
        cls: el.className && String(el.className)});
    }
  }
  return found;
})
