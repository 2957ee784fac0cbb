"""Where the run stands, as an inline SVG: the workflow's nodes in layers from its edges, the gate highlighted.

Pure: nodes and edges in, a `Drawing` out (templates/graph.svg draws it). Colours come from CSS classes (the page's
nonce'd style sheet), never from style attributes, so the strict Content-Security-Policy holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from interlude.api.page import templating

NODE_W = 168
NODE_H = 44
COL_GAP = 24
ROW_GAP = 40
PAD = 12
LABEL_CHARS = 20
VERDICT_CHARS = 26

# Node status → (CSS class suffix, plain words).
STATUS_WORDS = {
    "completed": "done",
    "failed": "failed",
    "skipped": "skipped",
    "queued": "queued",
    "suspended": "waiting",
    "sleeping": "sleeping",
    "pending": "not reached yet",
}


@dataclass(frozen=True)
class GraphNode:
    id: str
    type_id: str
    status: str
    # What a person calls the step (the node's name, else the id its author wrote); its id when it has neither.
    name: str = ""
    # How a closed gate ended, in words, when its state alone would mislead ("rejected by Ana: too casual", never
    # "failed"): shown instead of the state, in neutral colours.
    verdict: str = ""

    @property
    def label(self) -> str:
        return self.name or self.id


def layer_of(node_ids: Sequence[str], edges: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Longest-path layering; edges that close a loop (back edges found by a DFS from the roots) are ignored."""
    known = set(node_ids)
    succ: dict[str, list[str]] = {n: [] for n in node_ids}
    for a, b in edges:
        if a in known and b in known and b not in succ[a]:
            succ[a].append(b)
    back = _back_edges(node_ids, succ)
    preds: dict[str, list[str]] = {n: [] for n in node_ids}
    for a, targets in succ.items():
        for b in targets:
            if (a, b) not in back:
                preds[b].append(a)
    layer: dict[str, int] = {}

    def depth(n: str, trail: frozenset[str]) -> int:
        if n in layer:
            return layer[n]
        if n in trail:  # only reachable through a cycle the DFS did not see; cut it here
            return 0
        value = max((depth(p, trail | {n}) + 1 for p in preds[n]), default=0)
        layer[n] = value
        return value

    for n in node_ids:
        depth(n, frozenset())
    return layer


def _back_edges(node_ids: Sequence[str], succ: dict[str, list[str]]) -> set[tuple[str, str]]:
    has_pred = {b for targets in succ.values() for b in targets}
    roots = [n for n in node_ids if n not in has_pred] + list(node_ids)
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    back: set[tuple[str, str]] = set()
    for root in roots:
        if root in state:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        state[root] = 1
        while stack:
            node, i = stack[-1]
            if i < len(succ[node]):
                stack[-1] = (node, i + 1)
                nxt = succ[node][i]
                if state.get(nxt) == 1:
                    back.add((node, nxt))
                elif nxt not in state:
                    state[nxt] = 1
                    stack.append((nxt, 0))
            else:
                state[node] = 2
                stack.pop()
    return back


def positions(nodes: Sequence[GraphNode], edges: Sequence[tuple[str, str]]) -> tuple[dict[str, tuple[int, int]], int, int]:
    """Top-left corner of each node box, and the drawing's width and height."""
    rows = _rows([n.id for n in nodes], edges)
    widest = max((len(row) for row in rows.values()), default=1)
    width = widest * NODE_W + (widest - 1) * COL_GAP + 2 * PAD
    height = len(rows) * NODE_H + (len(rows) - 1) * ROW_GAP + 2 * PAD if rows else 2 * PAD
    pos: dict[str, tuple[int, int]] = {}
    for r, row in rows.items():
        row_w = len(row) * NODE_W + (len(row) - 1) * COL_GAP
        x0 = (width - row_w) // 2
        for i, n in enumerate(row):
            pos[n] = (x0 + i * (NODE_W + COL_GAP), PAD + r * (NODE_H + ROW_GAP))
    return pos, width, height


def _rows(ids: Sequence[str], edges: Sequence[tuple[str, str]]) -> dict[int, list[str]]:
    """The nodes of each layer, left to right."""
    layer = layer_of(ids, edges)
    rows: dict[int, list[str]] = {}
    for n in ids:
        rows.setdefault(layer[n], []).append(n)
    # One barycentre pass orders each row under its parents, which removes most crossings in small graphs.
    order: dict[str, float] = {}
    for r in sorted(rows):
        if r > 0:
            parents = {b: [order[a] for a, bb in edges if bb == b and a in order and layer[a] < r] for b in rows[r]}
            rows[r].sort(key=lambda b: (sum(parents[b]) / len(parents[b])) if parents[b] else 0.0)
        for i, n in enumerate(rows[r]):
            order[n] = i - (len(rows[r]) - 1) / 2
    return rows


def _label(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class DrawnEdge:
    path: str  # the SVG path's d
    back: bool  # a loop back (or a same-row edge), drawn dashed


@dataclass(frozen=True)
class DrawnNode:
    x: int
    y: int
    classes: str
    label: str
    words: str
    # Where choosing the box leads (the console's run page: the step's input and output); "" for none.
    href: str = ""


@dataclass(frozen=True)
class Drawing:
    """What templates/graph.svg draws: the sizes, every edge's path and every node's box and words."""

    width: int
    height: int
    edges: list[DrawnEdge]
    nodes: list[DrawnNode]
    node_w: int = NODE_W
    node_h: int = NODE_H


def drawing(nodes: Sequence[GraphNode], edges: Sequence[tuple[str, str]], gate: str, viewer_decides: bool = True) -> Drawing:
    """`viewer_decides`: the person looking may decide the gate (a view-only link is never told it waits for them)."""
    pos, width, height = positions(nodes, edges)
    drawn_edges = []
    seen: set[tuple[str, str]] = set()
    for a, b in edges:
        if a not in pos or b not in pos or (a, b) in seen:
            continue
        seen.add((a, b))
        (ax, ay), (bx, by) = pos[a], pos[b]
        if by > ay:
            x1, y1, x2, y2 = ax + NODE_W // 2, ay + NODE_H, bx + NODE_W // 2, by
            mid = (y1 + y2) // 2
            drawn_edges.append(DrawnEdge(f"M{x1},{y1} C{x1},{mid} {x2},{mid} {x2},{y2}", back=False))
        else:
            # A loop back (or a same-row edge): leave by the right side, come back into the right side.
            x1, y1, x2, y2 = ax + NODE_W, ay + NODE_H // 2, bx + NODE_W, by + NODE_H // 2
            bulge = max(x1, x2) + PAD
            drawn_edges.append(DrawnEdge(f"M{x1},{y1} C{bulge},{y1} {bulge},{y2} {x2},{y2}", back=True))
    drawn_nodes = []
    for node in nodes:
        x, y = pos[node.id]
        status = node.status if node.status in STATUS_WORDS else "pending"
        classes = f"node s-{'verdict' if node.verdict else status}" + (" gate" if node.id == gate else "")
        words = STATUS_WORDS[status]
        if node.verdict:
            words = _label(node.verdict, VERDICT_CHARS)
        elif node.id == gate:
            waiting = "waiting for you" if viewer_decides else "waiting for a decision"
            words = waiting if status == "suspended" else f"this request: {words}"
        drawn_nodes.append(DrawnNode(x, y, classes, _label(node.label), words))
    return Drawing(width, height, drawn_edges, drawn_nodes)


def render_svg(nodes: Sequence[GraphNode], edges: Sequence[tuple[str, str]], gate: str, viewer_decides: bool = True) -> str:
    return templating.render("page/graph.svg", graph=drawing(nodes, edges, gate, viewer_decides))


def describe(nodes: Sequence[GraphNode], gate: str) -> list[tuple[str, str]]:
    """(node id, plain words) in workflow order, for the text list beside the drawing."""
    out = []
    for n in nodes:
        words = STATUS_WORDS.get(n.status, "not reached yet")
        if n.verdict:
            words = n.verdict
        elif n.id == gate:
            words = "waiting for this decision" if n.status == "suspended" else f"{words} (this request)"
        out.append((n.id, words))
    return out
