"""The report's markdown as HTML, for a page: headings, tables, lists and paragraphs (what the
report's markdown uses), escaped."""

from __future__ import annotations

import html
import re

_CELL_NUMBER = re.compile(r"^[−\-+]?[\d.,]+( ?[%a-zA-Zµ/]+)?$")


def _inline(text: str) -> str:
    text = html.escape(text, quote=False)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", text)


def markdown_html(text: str) -> str:
    """The report's markdown as HTML: headings, tables, lists and paragraphs (what it uses)."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        if line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            head, body = block[0], [r for r in block[1:] if not all(set(c) <= set("-: ") for c in r)]
            out.append("<table><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr>")
            for cells in body:
                out.append("<tr>" + "".join(
                    f"<td class=\"num\">{_inline(c)}</td>" if _CELL_NUMBER.match(c) else f"<td>{_inline(c)}</td>"
                    for c in cells) + "</tr>")
            out.append("</table>")
            continue
        if line.startswith("- "):
            out.append("<ul>")
            while i < len(lines) and lines[i].startswith("- "):
                out.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            out.append("</ul>")
            continue
        heading = re.match(r"^(#{1,4}) (.*)$", line)
        if heading:
            level = min(len(heading.group(1)) + 1, 4)
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif line:
            out.append(f"<p>{_inline(line)}</p>")
        i += 1
    return "\n".join(out)
