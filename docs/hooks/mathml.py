"""MkDocs hook: the pages' TeX ($...$, $$...$$) becomes MathML when the site is built.

pymdownx.arithmatex marks the math; this hook converts it with latex2mathml, so the pages carry
MathML, which browsers render natively: no script, no CDN, and the site reads the same offline.
A formula latex2mathml cannot convert fails the (strict) build rather than showing raw TeX.
"""

from __future__ import annotations

import html
import logging
import re
from typing import Any

from latex2mathml.converter import convert

log = logging.getLogger("mkdocs.hooks.mathml")

INLINE = re.compile(r'<span class="arithmatex">\\\((.*?)\\\)</span>', re.S)
BLOCK = re.compile(r'<div class="arithmatex">\\\[(.*?)\\\]</div>', re.S)


def mathml(tex: str, display: str, where: str) -> str:
    source = html.unescape(tex).strip()
    try:
        converted = convert(source, display=display)
    except Exception as error:
        log.warning("%s: cannot convert $%s$ to MathML (%s)", where, source, error)
        return html.escape(source)
    return f'<span class="math-{display}">{converted}</span>'


def on_page_content(content: str, page: Any, config: Any, files: Any) -> str:
    where = page.file.src_uri
    content = BLOCK.sub(lambda m: mathml(m.group(1), "block", where), content)
    return INLINE.sub(lambda m: mathml(m.group(1), "inline", where), content)
