"""A program's control-flow graph (records.ControlFlow over its listing) as a static SVG: basic blocks stacked in
address order, each a box of its instructions, shaded by the share of the traced cycles spent in it; edges drawn
beside the boxes, one lane each, coloured by kind (taken, not taken, always). No layout engine is needed: code order
is the layout people read disassembly in."""
from __future__ import annotations

from html import escape

from ..records import Listing

LINE_H, CHAR_W, PAD, GAP, LANE_W = 14, 6.6, 6, 18, 10
EDGE_COLORS = {"taken": "#2a9d3f", "not taken": "#d62828", "always": "#1d5fbf"}
HOT = (244, 162, 97)  # the fill of the block with the most cycles; others fade to white by their share


def _fill(share: float) -> str:
    r, g, b = (round(255 - (255 - c) * share) for c in HOT)
    return f"#{r:02x}{g:02x}{b:02x}"


def cfg_svg(listing: Listing) -> str:
    """The SVG text ('' without a control-flow graph)."""
    cfg = listing.cfg
    if cfg is None or not cfg.blocks:
        return ""
    text_w = max(len(line) for line in listing.lines) * CHAR_W + 2 * PAD
    tops, y = [], LINE_H * 2
    for s, e in cfg.blocks:
        tops.append(y)
        y += (e - s) * LINE_H + 2 * PAD + GAP
    height = y
    width = text_w + LANE_W * (len(cfg.edges) + 2)
    total = max(cfg.cycles, default=0)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="cfg" width="{width:.0f}" height="{height}" '
           f'viewBox="0 0 {width:.0f} {height}" font-family="monospace" font-size="11">',
           '<defs>' + "".join(f'<marker id="arrow-{k.replace(" ", "-")}" viewBox="0 0 10 10" refX="10" refY="5" '
                              f'markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0L10,5L0,10z" fill="{c}"/>'
                              '</marker>' for k, c in EDGE_COLORS.items()) + '</defs>',
           '<text x="0" y="11">' + " ".join(f'<tspan fill="{c}">■ {k}</tspan>' for k, c in EDGE_COLORS.items()) +
           (" · blocks shaded by traced cycles" if cfg.measured else "") + "</text>"]
    for b, ((s, e), top) in enumerate(zip(cfg.blocks, tops, strict=True)):
        share = cfg.cycles[b] / total if total else 0.0
        title = f"block {b}: {e - s} instructions" + (f", {cfg.cycles[b]} cycles ({share:.0%})" if cfg.measured else "")
        out.append(f'<g class="block" id="block-{b}"><title>{escape(title)}</title>'
                   f'<rect x="0.5" y="{top + 0.5}" width="{text_w:.0f}" height="{(e - s) * LINE_H + 2 * PAD}" '
                   f'fill="{_fill(share)}" stroke="#555"/>')
        for k in range(s, e):
            out.append(f'<text x="{PAD}" y="{top + PAD + (k - s + 1) * LINE_H - 3}" xml:space="preserve">'
                       f'{escape(listing.lines[k])}</text>')
        out.append("</g>")
    for n, (src, dst, kind) in enumerate(cfg.edges):
        s, e = cfg.blocks[src]
        y0 = tops[src] + (e - s) * LINE_H + PAD
        y1 = tops[dst] + PAD
        x = text_w + LANE_W * (n + 1)
        color = EDGE_COLORS[kind]
        out.append(f'<path class="edge {kind.replace(" ", "-")}" d="M{text_w:.0f},{y0} H{x:.0f} V{y1} H{text_w:.0f}" '
                   f'fill="none" stroke="{color}" stroke-width="1.5" '
                   f'marker-end="url(#arrow-{kind.replace(" ", "-")})"><title>{kind}: block {src} → block {dst}'
                   '</title></path>')
    out.append("</svg>")
    return "\n".join(out)
