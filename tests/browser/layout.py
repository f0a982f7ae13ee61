"""What the browser tests measure in the page: sideways scroll, boxes on screen, overlaps."""

from __future__ import annotations

from typing import Any


async def sideways(page: Any) -> tuple[int, int]:
    """(the page's scroll width, the window's width): equal when nothing is wider."""
    found = await page.evaluate("() => [document.scrollingElement.scrollWidth, innerWidth]")
    return found[0], found[1]


async def assert_no_sideways_scroll(page: Any) -> None:
    width, window = await sideways(page)
    assert width <= window, f"the page is {width} px wide in a {window} px window"


async def assert_on_screen(page: Any, selector: str) -> None:
    """The element is wholly inside the viewport (not cut off, not below the fold)."""
    box = await page.locator(selector).bounding_box()
    assert box is not None, f"{selector} is not shown"
    width, height = await page.evaluate("() => [innerWidth, innerHeight]")
    assert box["x"] >= 0 and box["y"] >= 0, f"{selector} starts off screen: {box}"
    assert box["x"] + box["width"] <= width + 0.5, f"{selector} is cut off on the right: {box}"
    assert box["y"] + box["height"] <= height + 0.5, f"{selector} is below the fold: {box}"


OVERLAPS = """([over, under]) => {
  const a = document.querySelector(over).getBoundingClientRect();
  return [...document.querySelectorAll(under)].filter(n => {
    const b = n.getBoundingClientRect();
    return b.width && a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  }).map(n => n.textContent);
}"""


async def covered(page: Any, over: str, under: str) -> list[str]:
    """The texts of the `under` elements that the `over` element lies on."""
    return list(await page.evaluate(OVERLAPS, [over, under]))
