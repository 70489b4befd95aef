"""YAML as recx reads what a user writes (`--set` values, config and experiment files): PyYAML's safe loader with
YAML 1.2's floats, so that 1e-6 or 2E+3 (an exponent without a dot) is a number, not the string YAML 1.1 makes of it.

Two things a plain safe load lets through are refused with a yaml.YAMLError whose message names the lines (the
caller names the file): a key repeated in one mapping (the later one would silently win: two methods of one name),
and aliases that expand to more than MAX_EXPANDED_NODES nodes (a "billion laughs" document loads in no time, since an
alias shares its object, but whatever walks the value — a check, a merge, a message — then never ends).
"""

from __future__ import annotations

import re

import yaml

MAX_EXPANDED_NODES = 100_000
MERGE_TAG = "tag:yaml.org,2002:merge"


class RefusedYAML(yaml.YAMLError):
    """A document recx refuses to read; str() is one line naming the lines at fault."""


class Loader(yaml.SafeLoader):
    """The safe loader, plus the floats YAML 1.2 writes without a dot; refuses repeated keys in a mapping."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            lines = {}
            for key_node, _ in node.value:
                if key_node.tag == MERGE_TAG:
                    continue
                key, line = self.construct_object(key_node, deep=True), key_node.start_mark.line + 1
                try:
                    if key in lines:
                        raise RefusedYAML(
                            f"key {key!r} is given twice in one mapping, at lines {lines[key]} and {line} (the later "
                            "would silently replace the earlier); give each key once"
                        )
                    lines[key] = line
                except TypeError:  # an unhashable key: the safe loader's own error names it
                    break
        return super().construct_mapping(node, deep=deep)


Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"), list("-+0123456789")
)


def expanded_nodes(node: yaml.Node) -> int:
    """The number of nodes of the document with every alias expanded (a shared subtree counted once per use).
    RefusedYAML for an alias inside the value it names, and for aliases that make it more than MAX_EXPANDED_NODES
    (a document without aliases is never refused: its size is its text's)."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(current: yaml.Node) -> int:
        if id(current) in sizes:
            return sizes[id(current)]
        if id(current) in open_nodes:
            raise RefusedYAML(f"line {current.start_mark.line + 1}: an alias refers to a value that contains it")
        open_nodes.add(id(current))
        total = 1
        if isinstance(current, yaml.SequenceNode):
            total += sum(size(child) for child in current.value)
        elif isinstance(current, yaml.MappingNode):
            total += sum(size(key) + size(value) for key, value in current.value)
        open_nodes.discard(id(current))
        sizes[id(current)] = total
        return total

    total = size(node)
    if total > max(MAX_EXPANDED_NODES, len(sizes)):
        raise RefusedYAML(
            f"its aliases expand it to {total:,} values, more than the {MAX_EXPANDED_NODES:,} recx reads (an alias "
            "bomb?); write the values out, or use fewer aliases"
        )
    return total


def load(text: str):
    loader = Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        expanded_nodes(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()
