"""The report's markdown as HTML, for a page: headings, tables, lists and paragraphs (what the
report's markdown uses), every text in it as text."""

from __future__ import annotations

import html
import re

from gnnmon.report.escape import PUNCTUATION

_CELL_NUMBER = re.compile(r"^[−\-+]?[\d.,]+( ?[%a-zA-Zµ/]+)?$")


def _inline(text: str) -> str:
    """One line of the report's markdown as HTML: its escapes read back (``\\|`` is ``|``; see
    :mod:`gnnmon.report.escape`), ``code`` and **bold** (what it uses), everything else as text."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in PUNCTUATION:
            out.append(html.escape(text[i + 1]))
            i += 2
        elif c == "`" and (end := text.find("`", i + 1)) > i:
            out.append(f"<code>{html.escape(text[i + 1: end], quote=False)}</code>")  # literal, as markdown's
            i = end + 1
        elif text.startswith("**", i) and (end := _unescaped(text, "**", i + 2)) > i + 2:
            out.append(f"<b>{_inline(text[i + 2: end])}</b>")
            i = end + 2
        else:
            out.append(html.escape(c, quote=False))
            i += 1
    return "".join(out)


def _unescaped(text: str, mark: str, start: int) -> int:
    """Where ``mark`` next occurs in ``text`` from ``start`` with no backslash escaping it; -1 if nowhere."""
    i = start
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text.startswith(mark, i):
            return i
        else:
            i += 1
    return -1


def _cells(line: str) -> list[str]:
    """A markdown table row's cells, split at each ``|`` no backslash escapes."""
    cells, cell, i = [], [], 0
    while i < len(line):
        if line[i] == "\\" and i + 1 < len(line):
            cell.append(line[i: i + 2])
            i += 2
            continue
        if line[i] == "|":
            cells.append("".join(cell).strip())
            cell = []
        else:
            cell.append(line[i])
        i += 1
    cells.append("".join(cell).strip())
    return cells[1:-1] if len(cells) > 1 else cells


def markdown_html(text: str) -> str:
    """The report's markdown as HTML: headings, tables, lists and paragraphs (what it uses), each
    text in it as text (see :func:`_inline`)."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        if line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append(_cells(lines[i].strip()))
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
