"""Registration-time proof that a definition's outputs would grow without bound (issue 11).

A node whose output derives from what it references (NodeType.reads: `core.transform`, `modulex.transformer`)
inside a loop of the graph, referencing more than once in all outputs that come back round to it, doubles (at
least) on every pass: `{{t.x}}{{t.x}}` in a loop through `t`, or two transforms of a loop each referencing
both. Such a definition can never stay within its budgets once the loop turns, so it is refused when
registered. Growth that is only linear (one reference per pass) is left to the run-time budgets
(domain/budgets.py), which stop it with `interlude.budget_exceeded`.

Both graphs are walked without recursion (a definition may hold thousands of nodes).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine.registry import node_type as registered_type


def components(nodes: Iterable[str], successors: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components (Kosaraju, iterative)."""
    order: list[str] = []
    seen: set[str] = set()
    for root in nodes:
        if root in seen:
            continue
        seen.add(root)
        stack: list[tuple[str, Iterator[str]]] = [(root, iter(successors.get(root, ())))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                order.append(node)
            elif child not in seen:
                seen.add(child)
                stack.append((child, iter(successors.get(child, ()))))
    predecessors: dict[str, list[str]] = {}
    for node, targets in successors.items():
        for target in targets:
            predecessors.setdefault(target, []).append(node)
    assigned: set[str] = set()
    out: list[list[str]] = []
    for root in reversed(order):
        if root in assigned:
            continue
        assigned.add(root)
        member_stack, members = [root], []
        while member_stack:
            node = member_stack.pop()
            members.append(node)
            for source in predecessors.get(node, ()):
                if source not in assigned:
                    assigned.add(source)
                    member_stack.append(source)
        out.append(members)
    return out


def unbounded_growth(workflow: WorkflowDefinition) -> list[dict[str, str]]:
    """A problem per node whose output would multiply on every pass of a loop it is in."""
    feeds = _feeds_within_loops(workflow)
    position = {n.id: i for i, n in enumerate(workflow.nodes)}
    problems: list[dict[str, str]] = []
    for members in components(list(feeds), feeds):
        group = set(members)
        for nid in sorted(members, key=position.__getitem__):
            inward = [n for n in feeds.get(nid, []) if n in group]
            if len(inward) >= 2:
                problems.append(
                    {
                        "path": f"nodes/{position[nid]}/config",
                        "message": f"node {nid!r} references outputs of its own loop {len(inward)} times "
                        f"({', '.join(sorted(set(inward)))}): every pass would multiply its output, "
                        "so it grows without bound",
                    }
                )
    return problems


def _loops(workflow: WorkflowDefinition) -> dict[str, int]:
    """The number of the loop each node in a loop of the graph belongs to (a node in none is absent)."""
    ids = [n.id for n in workflow.nodes]
    flow = {nid: [e.targetNodeId for e in workflow.outgoing(nid)] for nid in ids}
    loop_of: dict[str, int] = {}
    for number, members in enumerate(components(ids, flow)):
        if len(members) > 1 or members[0] in flow[members[0]]:
            loop_of.update(dict.fromkeys(members, number))
    return loop_of


def _feeds_within_loops(workflow: WorkflowDefinition) -> dict[str, list[str]]:
    """Who feeds whom inside one loop: an edge per reference from a node whose output derives from what it
    reads (NodeType.reads) to another node of its loop."""
    loop_of = _loops(workflow)
    ids = {n.id for n in workflow.nodes}
    feeds: dict[str, list[str]] = {}
    for node in workflow.nodes:
        node_type = registered_type(node.typeId)
        if node_type is not None and node_type.reads is not None and node.id in loop_of:
            in_loop = {nid for nid, loop in loop_of.items() if loop == loop_of[node.id]}
            config = node_type.config_model.model_validate(node.config)
            feeds[node.id] = [n for n in node_type.reads(config, ids) if n in in_loop]
    return feeds
